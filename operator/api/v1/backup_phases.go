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

// BackupPhase is the state of a Backup (lab 8.2), as status.phase shows it.
// The enum marker on BackupStatus.Phase lists the same values.
type BackupPhase string

// The phases. A Backup is Pending until its Database is Ready, InProgress
// while a run's Job is active, then Completed or Failed (the outcome of the
// newest run, or an invalid schedule).
const (
	BackupPhasePending    BackupPhase = "Pending"
	BackupPhaseInProgress BackupPhase = "InProgress"
	BackupPhaseCompleted  BackupPhase = "Completed"
	BackupPhaseFailed     BackupPhase = "Failed"
)

// Backup condition type (lab 8.2, task 3.1): a Database with spec.backupRef
// waits for BackupReady=True.
const ConditionBackupReady = "BackupReady"

// Backup condition reasons. DatabaseNotFound, DatabaseNotReady, BackupCompleted
// and BackupFailed are also the reasons of the Backup's events.
const (
	ReasonDatabaseNotFound = "DatabaseNotFound"
	ReasonDatabaseNotReady = "DatabaseNotReady"
	ReasonBackupInProgress = "BackupInProgress"
	ReasonBackupCompleted  = "BackupCompleted"
	ReasonBackupFailed     = "BackupFailed"
	ReasonInvalidSchedule  = "InvalidSchedule"
)
