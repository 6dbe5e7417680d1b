package ui

import (
	"fmt"
	"net/http"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/policyapi"
)

// maxTryCommand is the longest command the policy page judges.
const maxTryCommand = 64 << 10

// policyView is a CommandPolicy's page, and the verdict on a command tried
// against it.
type policyView struct {
	Policy  *skillsv1.CommandPolicy
	Default string
	Command string
	// Invalid says why the policy does not compile.
	Invalid string
	Verdict *verdictView
}

// verdictView is what the judge decided for the command tried.
type verdictView struct {
	Action, Rule, Reason string
	Parts                []partView
}

type partView struct{ Action, Reason string }

// policy shows a CommandPolicy's rules, and judges the command of the try
// box (the query's command) with the operator's judge, as `kubectl skills
// policy check` does. Nothing is written.
func (s *server) policy(w http.ResponseWriter, r *http.Request) {
	key := client.ObjectKey{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	obj := &skillsv1.CommandPolicy{}
	if err := s.get(r.Context(), key, obj); err != nil {
		s.fail(w, "CommandPolicy "+key.Name, err)
		return
	}
	v := policyView{Policy: obj, Default: string(obj.Spec.DefaultAction), Command: r.URL.Query().Get("command")}
	if v.Default == "" {
		v.Default = string(policy.Ask)
	}
	m, err := policyapi.Compile(obj)
	switch {
	case err != nil:
		v.Invalid = cmdline.OneLine(err.Error())
	case len(v.Command) > maxTryCommand:
		v.Invalid = fmt.Sprintf("the command is %d bytes long; the box judges at most %d", len(v.Command), maxTryCommand)
	case strings.TrimSpace(v.Command) != "":
		d := m.DecideFor(v.Command, nil)
		vv := &verdictView{Action: string(d.Action), Reason: cmdline.Printable(d.Reason), Rule: "none: " + d.Reason}
		if d.RuleIndex >= 0 && d.RuleIndex < len(obj.Spec.Rules) {
			vv.Rule = fmt.Sprintf("rules[%d] %q", d.RuleIndex, cmdline.Printable(d.Rule))
		}
		for _, p := range d.Parts {
			vv.Parts = append(vv.Parts, partView{Action: string(p.Action), Reason: cmdline.Printable(p.Reason)})
		}
		v.Verdict = vv
	}
	s.show(w, http.StatusOK, "policy", page{Title: "CommandPolicy " + obj.Name, Nav: "runs", Data: v})
}
