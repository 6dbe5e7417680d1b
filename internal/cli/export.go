package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
)

const exportLong = `Write a Skill back to a skill folder: SKILL.md (its front matter exactly as
imported, then the instructions) and every bundled file, with mode 0755 for
executable files and 0644 for the others. A folder made by 'import' is
reproduced byte for byte.

The Skill comes from the cluster or from a manifest file:
  - NAME: the Skill NAME in the namespace of -n (or of the kubeconfig's
    context), read with the kubectl flags --kubeconfig, --context, ...;
  - FILE: an existing YAML or JSON file, as written by 'import' or by
    'kubectl get skills -o yaml'; documents of other kinds are skipped.
An argument that names an existing file is a FILE; anything else is a NAME.

Layout. When the source holds one Skill, DIR is the skill folder itself.
When it holds several, each is written to DIR/NAME, so that a repository
imported with --recursive can be exported again as a repository of skill
folders.

A folder that exists and is not empty is refused unless --force is given;
with --force, files are written over, and files of the folder that the skill
does not hold are left in place (and listed).

A Skill served from spec.bundle.image holds no files: only SKILL.md is
written, and the files are in that image. The invocation mode Disabled exists
only in the cluster and is not written to SKILL.md. Problems that do not keep
a folder from being written (for example a description that is too long) are
printed as warnings.`

const exportExample = `  # Write the Skill pdf-tools of the namespace agents to ./pdf-tools
  kubectl skills export pdf-tools -n agents -o ./pdf-tools

  # Write every Skill of a manifest to ./skills/NAME
  kubectl skills export skills.yaml -o ./skills

  # Everything the cluster holds
  kubectl get skills -o yaml > all.yaml && kubectl skills export all.yaml -o ./skills`

// skillName is what a Skill's name looks like (the API enforces it too).
var skillName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// exportOptions are the flags of export.
type exportOptions struct {
	*cmdline.Options
	outDir string
	force  bool
}

func newExportCommand(o *cmdline.Options) *cobra.Command {
	opts := &exportOptions{Options: o}
	cmd := &cobra.Command{
		Use:     "export (NAME | FILE) -o DIR",
		Short:   "Write a Skill from the cluster or a manifest back to a skill folder",
		Long:    exportLong,
		Example: exportExample,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.run(cmd.Context(), args[0])
		},
	}
	flags := cmd.Flags()
	flags.StringVarP(&opts.outDir, "output-dir", "o", "",
		"Folder to write: the skill folder for one Skill, the parent of DIR/NAME for several")
	flags.BoolVar(&opts.force, "force", false,
		"Write into a folder that is not empty; files the skill does not hold are left in place")
	_ = cmd.MarkFlagRequired("output-dir")
	return cmd
}

// exportItem is one Skill to write, and where.
type exportItem struct {
	source string
	object *skillsv1.Skill
	skill  *skill.Skill
	dir    string
	// problems were found while reading the source.
	problems []skill.Problem
}

// run reads the Skills, checks all of them, then writes each folder.
func (o *exportOptions) run(ctx context.Context, arg string) error {
	items, failed, err := o.load(ctx, arg)
	if err != nil {
		return err
	}
	for _, item := range items {
		if !o.check(item, len(items) > 1) {
			failed = true
		}
	}
	if failed {
		return cmdline.ErrProblems
	}
	for _, item := range items {
		if err := o.write(item); err != nil {
			return err
		}
	}
	return nil
}

// load reads the Skills to export from a file or from the cluster. It
// tells whether documents of the file that claim to be Skills could not be
// read (their problems are printed).
func (o *exportOptions) load(ctx context.Context, arg string) ([]*exportItem, bool, error) {
	info, statErr := os.Stat(arg)
	switch {
	case statErr == nil && info.IsDir():
		return nil, false, fmt.Errorf("failed to export %s: it is a folder; export reads a Skill NAME or a manifest FILE "+
			"(use import to turn a folder into a manifest)", arg)
	case statErr == nil:
		return o.loadFile(arg)
	case strings.ContainsAny(arg, `/\`) || filepath.Ext(arg) != "":
		return nil, false, fmt.Errorf("failed to read manifest %s: no such file", arg)
	}
	if !skillName.MatchString(arg) {
		return nil, false, fmt.Errorf("failed to export %q: it is neither an existing file nor a Skill name", arg)
	}
	obj, err := o.get(ctx, arg)
	if err != nil {
		return nil, false, err
	}
	return []*exportItem{{source: arg, object: obj, dir: o.outDir}}, false, nil
}

// loadFile reads every Skill of a manifest; one goes to DIR, several to
// DIR/NAME.
func (o *exportOptions) loadFile(path string) ([]*exportItem, bool, error) {
	skills, err := readManifestFile(path)
	if err != nil {
		return nil, false, err
	}
	if len(skills) == 0 {
		return nil, false, fmt.Errorf("failed to export %s: the file holds no Skill (kind: Skill, apiVersion: %s)",
			path, skillsv1.GroupVersion)
	}
	items := make([]*exportItem, 0, len(skills))
	seen := map[string]string{}
	failed := false
	for _, ms := range skills {
		if ms.object == nil {
			v := &verdict{source: ms.source}
			v.fail(fieldManifest, ms.problem, "compare the document with `kubectl explain skill.spec`")
			v.report(o.Streams.ErrOut)
			failed = true
			continue
		}
		item := &exportItem{source: ms.source, object: ms.object, dir: o.outDir}
		if len(skills) > 1 {
			item.dir = filepath.Join(o.outDir, ms.object.Name)
			if first, dup := seen[ms.object.Name]; dup {
				item.problems = append(item.problems, skill.Problem{
					Field:   "metadata.name",
					Message: fmt.Sprintf("the skill %q is also in %s; both would be written to %s", ms.object.Name, first, item.dir),
					Hint:    "keep one Skill per name in the file",
				})
			} else {
				seen[ms.object.Name] = ms.source
			}
		}
		items = append(items, item)
	}
	return items, failed, nil
}

// get reads a Skill from the cluster.
func (o *exportOptions) get(ctx context.Context, name string) (*skillsv1.Skill, error) {
	namespace, err := o.Namespace()
	if err != nil {
		return nil, err
	}
	c, err := o.Client()
	if err != nil {
		return nil, err
	}
	obj := &skillsv1.Skill{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("failed to get skill %s/%s: no Skill %q in namespace %q", namespace, name, name, namespace)
		}
		return nil, fmt.Errorf("failed to get skill %s/%s: %w", namespace, name, err)
	}
	return obj, nil
}

// check converts an item and reports what would keep it from being
// written whole; other problems are printed as warnings. It tells whether
// the item may be written.
func (o *exportOptions) check(item *exportItem, named bool) bool {
	v := &verdict{source: item.source, errors: item.problems}
	s, problems := skillapi.FromObject(item.object)
	v.errors = append(v.errors, problems...)
	report := skill.Validate(s, skill.Options{ExpectedName: item.object.Name})
	for _, p := range report.Errors {
		switch {
		case strings.HasPrefix(p.Field, fieldFiles):
			v.errors = append(v.errors, p)
		case named && p.Field == "metadata.name":
			p.Hint += "; the name is also the folder's name"
			v.errors = append(v.errors, p)
		default:
			p.Message += "; the folder is written, but will not pass validate"
			v.warnings = append(v.warnings, p)
		}
	}
	if item.object.Spec.Bundle != nil {
		v.warn(fieldBundle, fmt.Sprintf("the bundled files are in the image %s; only SKILL.md is written", item.object.Spec.Bundle.Image),
			"copy the files out of that image into the folder")
	}
	if item.object.Spec.Invocation == skillsv1.InvocationDisabled {
		v.warn("spec.invocation", "Disabled is not written to SKILL.md",
			"set spec.invocation: Disabled again after importing the folder")
	}
	if v.ok() {
		if err := o.checkTarget(item.dir); err != nil {
			v.fail(fieldFiles, err.Error(), "export into a new or empty folder, or add --force")
		}
	}
	v.report(o.Streams.ErrOut)
	item.skill = s
	return v.ok()
}

// checkTarget refuses a folder that exists and is not empty, unless --force.
func (o *exportOptions) checkTarget(dir string) error {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("failed to read folder %s: %w", dir, err)
	case !info.IsDir():
		return fmt.Errorf("%s is a file, not a folder", dir)
	case o.force:
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("failed to read folder %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("the folder %s is not empty", dir)
	}
	return nil
}

// write writes one skill folder and says so.
func (o *exportOptions) write(item *exportItem) error {
	if err := skill.WriteDir(item.skill, item.dir); err != nil {
		return fmt.Errorf("failed to export skill %s: %w", item.object.Name, err)
	}
	if o.force {
		if extra := extraFiles(item.dir, item.skill); len(extra) > 0 {
			_, _ = fmt.Fprintf(o.Streams.ErrOut, "%s: warning: %s the skill does not hold, left in place: %s\n",
				item.dir, pluralize(len(extra), "file"), strings.Join(extra, ", "))
		}
	}
	_, _ = fmt.Fprintf(o.Streams.Out, "skill %s exported to %s (SKILL.md and %s)\n",
		item.object.Name, item.dir, pluralize(len(item.skill.Files), "file"))
	return nil
}

// extraFiles lists the files below dir that are not part of the skill.
func extraFiles(dir string, s *skill.Skill) []string {
	written, err := skill.ParseDir(dir)
	if err != nil {
		return nil
	}
	want := make(map[string]bool, len(s.Files))
	for _, f := range s.Files {
		want[f.Path] = true
	}
	var extra []string
	for _, f := range written.Files {
		if !want[f.Path] {
			extra = append(extra, f.Path)
		}
	}
	return extra
}
