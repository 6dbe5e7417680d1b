package cli

import (
	"fmt"
	"io"

	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/policy"
)

// warningJSON is one warning of `policy check -o json`.
type warningJSON struct {
	Kind      string `json:"kind"`
	RuleIndex int    `json:"ruleIndex"`
	Rule      string `json:"rule"`
	Message   string `json:"message"`
}

// warningsJSON converts a policy's warnings; never nil, so the JSON holds
// a list.
func warningsJSON(warnings []policy.Warning) []warningJSON {
	out := make([]warningJSON, 0, len(warnings))
	for _, w := range warnings {
		out = append(out, warningJSON{Kind: string(w.Kind), RuleIndex: w.RuleIndex, Rule: w.Pattern, Message: w.Message})
	}
	return out
}

// writeWarningsText prints a policy's warnings after the decision, one a
// line, as status.warnings words them:
//
//	Warnings:
//	  rules[0] "git log*": the * glued to the last word matches ...
//
// Nothing is printed when there are none.
func writeWarningsText(w io.Writer, warnings []policy.Warning) error {
	if len(warnings) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w, "Warnings:"); err != nil {
		return fmt.Errorf("failed to write warnings: %w", err)
	}
	for _, warning := range warnings {
		if _, err := fmt.Fprintf(w, "  %s\n", cmdline.Printable(warning.String())); err != nil {
			return fmt.Errorf("failed to write warnings: %w", err)
		}
	}
	return nil
}
