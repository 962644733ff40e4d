package cmdutil

import (
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/labs"
)

// passedLabs is the user's record of fully passed labs, beside the clusters.
func passedLabs() *labs.Passed { return labs.PassedIn(cluster.StateDir("")) }

// RecordPassed notes that a whole lab passed, so hints move on to the next
// one. Failing to write it costs only a hint: the error is for a warning.
func RecordPassed(labID string) error { return passedLabs().Add(labID) }

// NextLab is the lab a user most likely does next on a cluster running an
// operator of project (a reference project's name, "" for the Database
// operator): the first lab of that project not passed yet. Nil when no lab
// uses the project.
func NextLab(all []*labs.Lab, project string) *labs.Lab {
	passed, _ := passedLabs().List() // an unreadable record: start from the first lab
	return labs.Next(all, project, passed)
}

// VerifyCommand is `labctl verify LAB` as the user can type it, with the
// flags a cluster other than the default needs.
func VerifyCommand(labID, clusterName string) string {
	cmd := Invocation() + " verify " + labID
	if clusterName != cluster.DefaultName {
		cmd += " --name " + clusterName
	}
	return cmd
}
