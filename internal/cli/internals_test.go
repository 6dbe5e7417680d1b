package cli

import "errors"

// SetApproval is setApproval, for the tests of package cli_test, which run
// against a real API server.
var SetApproval = setApproval

// DecidedBy returns the approver an "already decided" error of
// SetApproval names, "" when err is no such error.
func DecidedBy(err error) string {
	var decided *alreadyDecidedError
	if errors.As(err, &decided) {
		return decided.approval.Approver
	}
	return ""
}
