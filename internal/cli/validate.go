package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillsref"
)

const validateLong = `Check skill folders and Skill manifests offline, with the rules the operator
applies in the cluster, and print every problem found.

Each PATH is one of:
  - a skill folder (a folder holding a SKILL.md), judged as 'import' would;
    its name must equal the name in the front matter;
  - a SKILL.md file, which stands for its folder;
  - a manifest file (YAML or JSON, one or more documents): every Skill in it,
    including the items of a List as written by 'kubectl get skills -o yaml',
    is judged; documents of other kinds are skipped.

With --recursive, each folder PATH is a repository and every folder below it
that holds a SKILL.md is judged.

Every problem is printed to standard output on its own line as

  PATH: FIELD: PROBLEM (HINT)

where PATH is the folder, the file, or FILE#N for the N-th Skill of a file
that holds several, and FIELD is the Skill field concerned (metadata.name,
spec.description, spec.files[2].path, ...). Warnings are printed as
PATH: warning: FIELD: ... and do not make an input invalid. A valid input gets
the line PATH: valid (skill NAME).

The rules: the name (lowercase letters, digits and single hyphens, at most 64
characters, equal to the folder's name), a description of 1 to 4096
characters without '<' or '>', a compatibility of at most 500 characters, a
non-empty body within --max-instructions-bytes, front matter that agrees with
the fields, relative and clean file paths without '..' or duplicates, links
that stay inside the folder, content that fits in the API server (1,500,000
bytes of JSON) and in the operator's ConfigMaps.

Front-matter keys outside the six of the Agent Skills specification (name,
description, license, compatibility, metadata, allowed-tools) and
descriptions over 1024 characters are warnings: the operator serves such a
skill, but other hosts may refuse it.

With --strict, each input is also judged by the rules of the Agent Skills
reference validator, as the npm package skills-ref 0.1.5 applies them
('skills-ref validate FOLDER'), and every rule it breaks is an error:

  PATH: FIELD: skills-ref RULE: PROBLEM (HINT)

The rules: SKILL.md (or skill.md) starts with '---', and the front matter,
which ends at the next '---' even inside a line, is a YAML mapping that
js-yaml reads; only the six keys above; a name that, trimmed and
NFKC-normalised, is not empty, at most 64 characters, lowercase, without a
hyphen at either end or two in a row, of letters, digits and hyphens, and
equal to the folder's name; a description that is not blank and at most 1024
characters; a compatibility that is text of at most 500 characters. Lengths
are counted in UTF-16 code units, as JavaScript counts them. A manifest's
Skill is judged as the folder 'export' would write. Hosts that check skills
with the reference validator accept what passes --strict.

Exit status: 0 when every input is valid, 1 otherwise.`

const validateExample = `  # Check one skill folder
  kubectl skills validate ./pdf-tools

  # Check every skill of a repository, as a CI step
  kubectl skills validate --recursive ./skills

  # Check that other hosts accept them too (the Agent Skills reference rules)
  kubectl skills validate --strict --recursive ./skills

  # Check a manifest and what the cluster holds
  kubectl skills validate skills.yaml
  kubectl get skills -o yaml > current.yaml && kubectl skills validate current.yaml`

// validateOptions are the flags of validate.
type validateOptions struct {
	*cmdline.Options
	recursive    bool
	strict       bool
	maxBodyBytes int
}

func newValidateCommand(o *cmdline.Options) *cobra.Command {
	opts := &validateOptions{Options: o}
	cmd := &cobra.Command{
		Use:     "validate PATH...",
		Short:   "Check skill folders and Skill manifests offline",
		Long:    validateLong,
		Example: validateExample,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.run(args)
		},
	}
	flags := cmd.Flags()
	flags.BoolVarP(&opts.recursive, "recursive", "R", false,
		"Treat each folder PATH as a repository and check every folder below it that holds a SKILL.md")
	flags.BoolVar(&opts.strict, "strict", false,
		"Also apply the rules of the Agent Skills reference validator (skills-ref "+skillsref.Version+"), as errors")
	addMaxBodyFlag(flags, &opts.maxBodyBytes)
	return cmd
}

// run judges every input and prints what it found.
func (o *validateOptions) run(args []string) error {
	j := &judge{maxBodyBytes: o.maxBodyBytes, strict: o.strict}
	failed := false
	for _, arg := range args {
		for _, v := range o.judgePath(j, arg) {
			printVerdict(o.Streams.Out, v)
			failed = failed || !v.ok()
		}
	}
	if failed {
		return cmdline.ErrProblems
	}
	return nil
}

// judgePath judges one command-line path: a folder, a SKILL.md or a
// manifest file.
func (o *validateOptions) judgePath(j *judge, path string) []*verdict {
	kind, err := statInput(path)
	if err != nil {
		v := &verdict{source: path}
		v.fail(fieldManifest, err.Error(), "")
		return []*verdict{v}
	}
	if kind == inputFile {
		if filepath.Base(path) != skill.SkillFileName {
			return j.manifestFile(path)
		}
		path = filepath.Dir(path)
	}
	folders, failed := skillFolders(path, o.recursive)
	if failed != nil {
		return []*verdict{failed}
	}
	verdicts := make([]*verdict, 0, len(folders))
	for _, dir := range folders {
		verdicts = append(verdicts, j.folder(dir))
	}
	return verdicts
}

// printVerdict prints a verdict's problems, or that the input is valid.
func printVerdict(w io.Writer, v *verdict) {
	v.report(w)
	if v.ok() && v.object != nil {
		_, _ = fmt.Fprintf(w, "%s: valid (skill %s)\n", v.source, v.object.Name)
	}
}
