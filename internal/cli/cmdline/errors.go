package cmdline

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ErrProblems is returned by a command that has already printed the problems
// it found; the process exits with code 1 and prints nothing more.
var ErrProblems = errors.New("problems were found")

// APIMessage is the message of an API server error.
func APIMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}
