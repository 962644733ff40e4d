package cmdutil

import (
	"errors"

	"github.com/labctl/labctl/internal/cluster"
)

func isNotFound(err error) bool { return errors.Is(err, cluster.ErrNotFound) }
