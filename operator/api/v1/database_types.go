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

// DatabaseSpec defines the desired state of Database
type DatabaseSpec struct {
	// Image is the PostgreSQL container image.
	// +kubebuilder:validation:Required
	// +kubebuilder:default="postgres:14"
	Image string `json:"image"`

	// Replicas is the number of database replicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Storage configures the persistent volume of each replica.
	// +kubebuilder:validation:Required
	Storage StorageSpec `json:"storage"`

	// Resources are the compute resources of the postgres container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// DatabaseName is the name of the database to create.
	// +kubebuilder:validation:Required
	DatabaseName string `json:"databaseName"`

	// Username is the database owner's user name.
	// +kubebuilder:validation:Required
	Username string `json:"username"`

	// BackupRef references a Backup resource that manages backups for this database.
	// When set, the Database waits before provisioning until that Backup reports
	// the condition BackupReady=True.
	// +optional
	BackupRef *corev1.LocalObjectReference `json:"backupRef,omitempty"`
}

// StorageSpec defines storage configuration
type StorageSpec struct {
	// Size is the size of each replica's volume, e.g. 10Gi or 500Mi.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Pattern=`^[0-9]+(Gi|Mi)$`
	Size string `json:"size"`

	// StorageClass is the StorageClass of the volumes; the cluster default when empty.
	// +optional
	StorageClass string `json:"storageClass,omitempty"`
}

// DatabaseStatus defines the observed state of Database
type DatabaseStatus struct {
	// Phase is the current phase of the database.
	// +kubebuilder:validation:Enum=Pending;Provisioning;Configuring;Deploying;Verifying;Ready;Failed
	// +optional
	Phase DatabasePhase `json:"phase,omitempty"`

	// Ready is true when every replica is ready.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// Endpoint is the in-cluster address of the database: <name>.<namespace>.svc.cluster.local:5432
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// SecretName is the name of the Secret holding the credentials.
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions represent the latest observations of the database's state
	// (types Ready and Progressing).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Ready",type="boolean",JSONPath=".status.ready"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// Database is the Schema for the databases API
type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DatabaseSpec   `json:"spec,omitempty"`
	Status DatabaseStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// DatabaseList contains a list of Database
type DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Database `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Database{}, &DatabaseList{})
}
