package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/policyapi"
)

const commandPolicyKind = "CommandPolicy"

const policyLong = `Work with CommandPolicies offline.

A CommandPolicy decides what happens to each command an agent asks to run:
Always (it runs in a sandbox Job), Ask (it waits for a person to approve it
with 'kubectl skills approve') or Never (it is refused). See docs/policy.md
for how rules match a command line.`

const policyCheckLong = `Judge a command line against a CommandPolicy manifest, with the same code the
operator runs, and print the decision: the action (Always, Ask or Never), the
rule that decided it and the reason. Nothing is sent to a cluster.

POLICY.yaml is a YAML or JSON file holding one CommandPolicy of
kubeskills.io/v1alpha1 (a List holding one, as written by
'kubectl get commandpolicy NAME -o yaml', works too); '-f -' reads standard
input. The policy is read strictly: an unknown or misspelt field, a bad
action or pattern, or an example of spec.examples that the policy does not
decide as expected makes the command fail, as the operator would mark the
policy Stalled and deny every command.

Give the command after '--', as one argument, quoted the way you would give
it to 'sh -c'. Every simple command of pipelines, lists, subshells, loops and
conditionals is judged on its own and the strictest action wins; with more
than one part, each is listed.

--skill-tools judges the command as run on behalf of a skill whose SKILL.md
front matter says 'allowed-tools: ...' with that value: the skill can only
narrow what the policy allows (an Always that no entry covers becomes Ask).

With -o json the decision is printed as one JSON object:

  {"action":"Ask","rule":"kubectl get ** *secret* **","reason":"...","parts":[...]}

where rule is "" when no rule decided (the default action or a construct
such as eval), and each part has command, action, rule and reason.

The policy's warnings follow the decision, as the operator lists them in
the CommandPolicy's status.warnings: what the policy allows, or fails to
match, that its author may not expect (a glob glued to a pattern's last
word, defaultAction Always, an Always rule that lets git, kubectl, curl, ...
run programs, write files or change the cluster). With -o json they are
"warnings", a list of {"kind","ruleIndex","rule","message"} (ruleIndex -1
for the defaultAction). Warnings do not change the exit status.

Exit status: 0 when a decision was made, whatever the action; 1 when the
policy file cannot be read or is not a valid policy, or the command line is
wrong.`

const policyCheckExample = `  # May the agent read pods? And delete them?
  kubectl skills policy check -f policy.yaml -- 'kubectl get pods -n web'
  kubectl skills policy check -f policy.yaml -- 'kubectl get pods | xargs kubectl delete pod'

  # As a skill whose SKILL.md allows only git status
  kubectl skills policy check -f policy.yaml --skill-tools 'Bash(git status:*)' -- 'git status -s'

  # In a script: act on the action
  kubectl skills policy check -f policy.yaml -o json -- "$CMD" | jq -r .action

  # Check the policy the cluster holds
  kubectl get commandpolicy ops -o yaml | kubectl skills policy check -f - -- 'rm -rf /tmp/cache'`

// newPolicyCommand returns `kubectl skills policy` and its subcommands.
func newPolicyCommand(o *cmdline.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "policy",
		Short:   "Work with CommandPolicies offline: judge a command before applying a policy",
		Long:    policyLong,
		Example: `  kubectl skills policy check -f policy.yaml -- 'kubectl get pods'`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newPolicyCheckCommand(o))
	cmd.AddCommand(newPolicyImportCommand(o))
	return cmd
}

// policyCheckOptions are the flags of policy check.
type policyCheckOptions struct {
	*cmdline.Options
	file       string
	output     string
	skillTools string
}

func newPolicyCheckCommand(o *cmdline.Options) *cobra.Command {
	opts := &policyCheckOptions{Options: o}
	cmd := &cobra.Command{
		Use:     "check -f POLICY.yaml [-o json] [--skill-tools TOOLS] -- 'COMMAND'",
		Short:   "Judge a command line against a CommandPolicy file, as the operator would",
		Long:    policyCheckLong,
		Example: policyCheckExample,
		Args:    commandArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.run(args[0])
		},
	}
	flags := cmd.Flags()
	flags.StringVarP(&opts.file, "filename", "f", "", "CommandPolicy manifest to judge with (YAML or JSON); - reads standard input")
	flags.StringVarP(&opts.output, "output", "o", "", "Output format: json; text when not set")
	flags.StringVar(&opts.skillTools, "skill-tools", "",
		"A skill's allowed-tools, as in SKILL.md (e.g. 'Bash(git status:*) Read'); they can only narrow the decision")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// commandArg accepts exactly one argument, the command line to judge.
func commandArg(_ *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return errors.New("no command to judge: give it after --, as one quoted argument, e.g. -- 'kubectl get pods'")
	case len(args) > 1:
		return fmt.Errorf("%d arguments given, want one: quote the whole command line, e.g. -- '%s'",
			len(args), strings.Join(args, " "))
	}
	return nil
}

// run reads the policy, judges the command and prints the decision.
func (o *policyCheckOptions) run(command string) error {
	if o.output != "" && o.output != "json" {
		return fmt.Errorf("unsupported output format %q: use -o json, or leave -o out for text", o.output)
	}
	obj, err := o.readPolicy()
	if err != nil {
		return err
	}
	m, err := policyapi.Compile(obj)
	if err != nil {
		return fmt.Errorf("CommandPolicy %s in %s is not valid: %w", obj.Name, o.source(), err)
	}
	var tools []string
	if o.skillTools != "" {
		tools = policy.SplitAllowedTools(o.skillTools)
	}
	d := m.DecideFor(command, tools)
	warnings := m.Warnings()
	if o.output == "json" {
		return writeDecisionJSON(o.Streams.Out, d, warnings)
	}
	if err := writeDecisionText(o.Streams.Out, d, obj); err != nil {
		return err
	}
	return writeWarningsText(o.Streams.Out, warnings)
}

// source names the policy file in messages.
func (o *policyCheckOptions) source() string {
	if o.file == "-" {
		return "standard input"
	}
	return o.file
}

// readPolicy reads the one CommandPolicy of the file given with -f.
func (o *policyCheckOptions) readPolicy() (*skillsv1.CommandPolicy, error) {
	var data []byte
	var err error
	if o.file == "-" {
		data, err = io.ReadAll(o.Streams.In)
	} else {
		data, err = os.ReadFile(o.file)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read policy %s: %w", o.source(), err)
	}
	policies, others, err := decodePolicies(data)
	if err != nil {
		return nil, fmt.Errorf("failed to read policy %s: %w", o.source(), err)
	}
	switch {
	case len(policies) == 1:
		return policies[0], nil
	case len(policies) > 1:
		return nil, fmt.Errorf("failed to read policy %s: it holds %d CommandPolicies; put the one to check in a file of its own",
			o.source(), len(policies))
	}
	found := ""
	if len(others) > 0 {
		found = " (it holds " + strings.Join(others, ", ") + ")"
	}
	return nil, fmt.Errorf("failed to read policy %s: it holds no CommandPolicy%s; want apiVersion: %s and kind: %s",
		o.source(), found, skillsv1.GroupVersion, commandPolicyKind)
}

// decodePolicies reads every CommandPolicy of a YAML or JSON stream,
// including the items of a List, strictly: unknown and duplicate fields are
// errors. It also returns the kinds of the other documents, for messages.
func decodePolicies(data []byte) ([]*skillsv1.CommandPolicy, []string, error) {
	var policies []*skillsv1.CommandPolicy
	var others []string
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return policies, others, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("failed to split it into YAML documents: %w", err)
		}
		js, err := sigsyaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, nil, fmt.Errorf("document %d is not valid YAML: %w", n, err)
		}
		if trimmed := bytes.TrimSpace(js); len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
			continue
		}
		if err := decodeObject(js, &policies, &others); err != nil {
			return nil, nil, fmt.Errorf("document %d: %w", n, err)
		}
	}
}

// decodeObject reads one JSON object: a CommandPolicy, a List whose items
// are read in turn, or another kind, whose name is added to others.
func decodeObject(data []byte, policies *[]*skillsv1.CommandPolicy, others *[]string) error {
	var header struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &header); err != nil {
		return errors.New("not a Kubernetes object: want a mapping with apiVersion, kind, metadata and spec")
	}
	if header.Kind == "List" || header.Kind == commandPolicyKind+"List" {
		for _, item := range header.Items {
			if err := decodeObject(item, policies, others); err != nil {
				return err
			}
		}
		return nil
	}
	if header.Kind != commandPolicyKind {
		kind := header.Kind
		if kind == "" {
			kind = "an object without kind"
		}
		*others = append(*others, kind)
		return nil
	}
	if header.APIVersion != skillsv1.GroupVersion.String() {
		return fmt.Errorf("the CommandPolicy has apiVersion %q, want %s, the version this plugin reads",
			header.APIVersion, skillsv1.GroupVersion)
	}
	obj := &skillsv1.CommandPolicy{}
	strictErrs, err := sigsjson.UnmarshalStrict(data, obj)
	if err == nil && len(strictErrs) > 0 {
		err = errors.Join(strictErrs...)
	}
	if err != nil {
		return fmt.Errorf("the CommandPolicy does not match the API (compare it with `kubectl explain commandpolicy.spec`): %s",
			strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	*policies = append(*policies, obj)
	return nil
}

// decisionJSON is the shape of `policy check -o json`.
type decisionJSON struct {
	Action   string        `json:"action"`
	Rule     string        `json:"rule"`
	Reason   string        `json:"reason"`
	Parts    []partJSON    `json:"parts"`
	Warnings []warningJSON `json:"warnings"`
}

// partJSON is one simple command of the decision.
type partJSON struct {
	Command string `json:"command"`
	Action  string `json:"action"`
	Rule    string `json:"rule"`
	Reason  string `json:"reason"`
}

// writeDecisionJSON prints a decision as one JSON object on one line.
func writeDecisionJSON(w io.Writer, d policy.Decision, warnings []policy.Warning) error {
	out := decisionJSON{Action: string(d.Action), Rule: d.Rule, Reason: d.Reason, Parts: make([]partJSON, 0, len(d.Parts)),
		Warnings: warningsJSON(warnings)}
	for _, p := range d.Parts {
		out.Parts = append(out.Parts, partJSON{Command: p.Command, Action: string(p.Action), Rule: p.Rule, Reason: p.Reason})
	}
	data, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("failed to encode decision: %w", err)
	}
	if _, err := fmt.Fprintf(w, "%s\n", data); err != nil {
		return fmt.Errorf("failed to write decision: %w", err)
	}
	return nil
}

// writeDecisionText prints a decision for a person:
//
//	Action:  Never
//	Rule:    rules[6] "kubectl ** delete **" (people delete cluster objects, agents do not)
//	Reason:  "kubectl delete pod x" matched rules[6] ...
//	Parts:
//	  Always  "kubectl get pods" matched rules[0] ...
//	  Never   "kubectl delete pod x" matched rules[6] ...
//
// Parts are listed when there are more than one. Reasons quote commands
// with Go escapes, so no control character reaches the terminal.
func writeDecisionText(w io.Writer, d policy.Decision, obj *skillsv1.CommandPolicy) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	_, _ = fmt.Fprintf(tw, "Action:\t%s\n", d.Action)
	_, _ = fmt.Fprintf(tw, "Rule:\t%s\n", describeRule(d, obj))
	_, _ = fmt.Fprintf(tw, "Reason:\t%s\n", d.Reason)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("failed to write decision: %w", err)
	}
	if len(d.Parts) < 2 {
		return nil
	}
	_, _ = fmt.Fprintln(w, "Parts:")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, p := range d.Parts {
		_, _ = fmt.Fprintf(tw, "  %s\t%s\n", p.Action, p.Reason)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("failed to write decision: %w", err)
	}
	return nil
}

// describeRule names the deciding rule with its index and description, and
// says when the programs its command starts are not judged; or says that
// none decided.
func describeRule(d policy.Decision, obj *skillsv1.CommandPolicy) string {
	if d.RuleIndex < 0 || d.RuleIndex >= len(obj.Spec.Rules) {
		return "(none)"
	}
	s := fmt.Sprintf("rules[%d] %q", d.RuleIndex, d.Rule)
	rule := obj.Spec.Rules[d.RuleIndex]
	if rule.Description != "" {
		s += " (" + cmdline.Printable(rule.Description) + ")"
	}
	if rule.Children == skillsv1.ChildrenTrusted && d.Action != policy.Never {
		s += "; children: Trusted, the programs it starts are not judged"
	}
	return s
}
