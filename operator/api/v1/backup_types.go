/*
Copyright 2026 The labctl authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupSpec defines the desired state of Backup
type BackupSpec struct {
	// DatabaseRef references the Database to backup
	// +kubebuilder:validation:Required
	DatabaseRef corev1.LocalObjectReference `json:"databaseRef"`

	// Schedule is the cron schedule for automated backups (optional), in UTC
	// unless it starts with CRON_TZ=<zone>. The first backup runs as soon as the
	// Database is Ready, then one at each cron time. Without a schedule the
	// Backup runs once.
	// +optional
	Schedule string `json:"schedule,omitempty"`

	// Retention is the number of backups to retain
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=5
	// +optional
	Retention int `json:"retention,omitempty"`
}

// BackupStatus defines the observed state of Backup
type BackupStatus struct {
	// Phase is the current backup phase
	// +kubebuilder:validation:Enum=Pending;InProgress;Completed;Failed
	Phase BackupPhase `json:"phase,omitempty"`

	// BackupTime is when the backup was created
	BackupTime *metav1.Time `json:"backupTime,omitempty"`

	// BackupLocation is where the backup is stored, e.g. pvc://<claim>/<file>.sql
	BackupLocation string `json:"backupLocation,omitempty"`

	// Conditions represent the latest observations
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Database",type="string",JSONPath=".spec.databaseRef.name"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// Backup is the Schema for the backups API
type Backup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BackupSpec   `json:"spec,omitempty"`
	Status BackupStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// BackupList contains a list of Backup
type BackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Backup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Backup{}, &BackupList{})
}
