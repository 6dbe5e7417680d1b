package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/policyapi"
	"github.com/kubeskills/kubeskills/internal/policyimport"
)

const policyImportLong = `Turn the command rules of another agent into a CommandPolicy manifest.

Two formats are read:

  claude  Claude Code's settings.json: permissions.deny, ask and allow become
          Never, Ask and Always rules. Bash(...) rules are translated;
          rules for other tools (Read, Edit, WebFetch, mcp__...) are not.
  codex   Codex execpolicy .rules files: each prefix_rule becomes one rule
          per combination of its alternatives (pattern words, then any
          arguments); allow, prompt and forbidden become Always, Ask and
          Never; match and not_match examples become spec.examples.

The format follows from the file name (.json is claude, .rules is codex) or
from --format. Several .rules files make one policy; '-' reads standard input
(give --format).

Each rule keeps its meaning or is left out and reported: a rule is never
widened. The report on standard error lists what was not translated and the
differences in meaning. Where the source itself decides the commands no rule
matches (Claude Code's permission modes, Codex's heuristics), the policy's
defaultAction is Ask unless --default chooses another: an import never makes
unknown commands run without asking on its own. See docs/policy.md,
"Importing rules".

The manifest goes to standard output, or to the file given with -o. It is
checked before it is written: it compiles and its examples pass.

Exit status: 0 when a manifest was written, with or without notes; 1 when a
file cannot be read or parsed.`

const policyImportExample = `  # Claude Code's project settings
  kubectl skills policy import .claude/settings.json > policy.yaml

  # Codex's rules, into a file, asking for nothing Codex would have run
  kubectl skills policy import --name codex --default Never -o policy.yaml ~/.codex/rules/*.rules

  # Then try it
  kubectl skills policy check -f policy.yaml -- 'git push --force'`

// policyImportOptions are the flags of policy import.
type policyImportOptions struct {
	*cmdline.Options
	format string
	name   string
	def    string
	output string
}

func newPolicyImportCommand(o *cmdline.Options) *cobra.Command {
	opts := &policyImportOptions{Options: o}
	cmd := &cobra.Command{
		Use:     "import [--format claude|codex] [--name NAME] [--default ACTION] [-o FILE] FILE...",
		Short:   "Turn Claude Code permissions or Codex .rules into a CommandPolicy manifest",
		Long:    policyImportLong,
		Example: policyImportExample,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.run(args)
		},
	}
	flags := cmd.Flags()
	flags.StringVar(&opts.format, "format", "", "Source format: claude or codex; from the file name when not set")
	flags.StringVar(&opts.name, "name", "", "metadata.name of the CommandPolicy; from the first file's name when not set")
	flags.StringVar(&opts.def, "default", "", "spec.defaultAction: Always, Ask or Never; Ask, or Never for Claude Code's dontAsk, when not set")
	flags.StringVarP(&opts.output, "output", "o", "", "Write the manifest to this file rather than standard output")
	return cmd
}

// run reads the sources, translates them and writes the manifest and the
// report.
func (o *policyImportOptions) run(args []string) error {
	format, err := importFormat(o.format, args)
	if err != nil {
		return err
	}
	def := policy.Action(o.def)
	if def != "" && !def.Valid() {
		return fmt.Errorf("--default %q: want Always, Ask or Never", o.def)
	}
	name := o.name
	if name == "" {
		name = policyName(args[0])
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("--name %q is not a valid object name: %s", name, strings.Join(errs, "; "))
	}
	var files []policyimport.File
	stdin := false
	for _, a := range args {
		data, err := o.readSource(a, &stdin)
		if err != nil {
			return err
		}
		files = append(files, policyimport.File{Name: displayName(a), Data: data})
	}
	opts := policyimport.Options{Default: def}
	var res *policyimport.Result
	switch format {
	case "claude":
		if len(files) != 1 {
			return fmt.Errorf("claude: give one settings.json, not %d files; import each on its own", len(files))
		}
		res, err = policyimport.Claude(files[0].Name, files[0].Data, opts)
	default:
		res, err = policyimport.Codex(files, opts)
	}
	if err != nil {
		return err
	}
	obj := importedPolicy(name, res)
	if _, err := policyapi.Compile(obj); err != nil {
		return fmt.Errorf("the imported CommandPolicy is not valid: %w", err)
	}
	data, err := encodePolicy(obj)
	if err != nil {
		return err
	}
	if o.output == "" {
		if _, err := o.Streams.Out.Write(data); err != nil {
			return fmt.Errorf("failed to write the manifest: %w", err)
		}
	} else if err := os.WriteFile(o.output, data, 0o644); err != nil {
		return fmt.Errorf("failed to write the manifest: %w", err)
	}
	return writeImportReport(o.Streams.ErrOut, name, res)
}

// importFormat picks the source format from --format or the file names.
func importFormat(flag string, args []string) (string, error) {
	switch flag {
	case "claude", "codex":
		return flag, nil
	case "":
	default:
		return "", fmt.Errorf("--format %q: want claude or codex", flag)
	}
	format := ""
	for _, a := range args {
		f := ""
		switch {
		case strings.HasSuffix(a, ".json"):
			f = "claude"
		case strings.HasSuffix(a, ".rules"):
			f = "codex"
		default:
			return "", fmt.Errorf("cannot tell the format of %s from its name: give --format claude or --format codex", displayName(a))
		}
		if format != "" && f != format {
			return "", errors.New("the files are of two formats: import Claude Code settings and Codex rules separately")
		}
		format = f
	}
	return format, nil
}

// readSource reads one file, or standard input for "-" (once).
func (o *policyImportOptions) readSource(path string, stdin *bool) ([]byte, error) {
	if path == "-" {
		if *stdin {
			return nil, errors.New("'-' given twice: standard input can be read once")
		}
		*stdin = true
		data, err := io.ReadAll(o.Streams.In)
		if err != nil {
			return nil, fmt.Errorf("failed to read standard input: %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	return data, nil
}

// displayName names a source in notes.
func displayName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return filepath.Base(path)
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// policyName derives an object name from a file name: settings.local.json
// becomes settings-local.
func policyName(path string) string {
	base := strings.ToLower(filepath.Base(path))
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".json"), ".rules")
	name := strings.Trim(nonName.ReplaceAllString(base, "-"), "-")
	if name == "" || len(name) > 63 {
		return "imported"
	}
	return name
}

// importedPolicy builds the CommandPolicy object of a translation.
func importedPolicy(name string, res *policyimport.Result) *skillsv1.CommandPolicy {
	obj := &skillsv1.CommandPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: skillsv1.GroupVersion.String(), Kind: commandPolicyKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
	obj.Spec.DefaultAction = skillsv1.PolicyAction(res.Policy.Default)
	for _, r := range res.Policy.Rules {
		obj.Spec.Rules = append(obj.Spec.Rules, skillsv1.PolicyRule{
			Pattern: r.Pattern, Action: skillsv1.PolicyAction(r.Action), Description: r.Description,
		})
	}
	for _, e := range res.Examples {
		obj.Spec.Examples = append(obj.Spec.Examples, skillsv1.PolicyExample{Command: e.Command, Expect: skillsv1.PolicyAction(e.Expect)})
	}
	return obj
}

// encodePolicy writes a CommandPolicy as one YAML document, fields in the
// order of the API types, without status or unset fields.
func encodePolicy(obj *skillsv1.CommandPolicy) ([]byte, error) {
	data, err := encodeManifest(obj)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the CommandPolicy: %w", err)
	}
	return data, nil
}

// writeImportReport prints what was translated and every note.
func writeImportReport(w io.Writer, name string, res *policyimport.Result) error {
	skipped := 0
	for _, n := range res.Notes {
		if n.Skipped {
			skipped++
		}
	}
	_, _ = fmt.Fprintf(w, "CommandPolicy %s: %d source rules translated into %d rules, %d examples, defaultAction %s; %d entries not translated.\n",
		name, res.Translated, len(res.Policy.Rules), len(res.Examples), res.Policy.Default, skipped)
	for _, n := range res.Notes {
		if _, err := fmt.Fprintf(w, "  %s\n", cmdline.Printable(n.String())); err != nil {
			return fmt.Errorf("failed to write the report: %w", err)
		}
	}
	return nil
}
