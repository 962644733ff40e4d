package kube

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/labctl/labctl/internal/userr"
)

func TestAPIErrorSaysWhatToDo(t *testing.T) {
	gr := schema.GroupResource{Resource: "databases"}
	cases := map[error]string{
		errors.New("connection refused"):                       "labctl status",
		apierrors.NewForbidden(gr, "db", errors.New("no")):     "permission",
		apierrors.NewConflict(gr, "db", errors.New("changed")): "again",
		apierrors.NewAlreadyExists(gr, "db"):                   "again",
	}
	for cause, hint := range cases {
		err := APIError(cause, "delete Database db")
		var ue *userr.Error
		assert.True(t, errors.As(err, &ue))
		assert.Contains(t, userr.Message(err), "delete Database db: ")
		assert.Contains(t, ue.Next, hint, "%v", cause)
		assert.Equal(t, userr.ExitFailure, userr.Code(err))
	}
}
