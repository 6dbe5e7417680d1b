package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/skill"
)

const importLong = `Turn skill folders into Skill manifests, written to standard output as a
multi-document YAML stream for kubectl apply.

A skill folder holds a SKILL.md and any bundled files. Its name must equal the
name in the SKILL.md front matter. The front matter is kept exactly as written
(spec.frontMatter, with keys that other products add), the Markdown body goes
to spec.instructions, and every other file to spec.files with its executable
bit: UTF-8 text as content, anything else as base64 binaryContent (so is text
holding DEL, C1 control characters or U+FFFE/U+FFFF, which server-side apply
refuses or alters). Links that stay inside the folder are read as the files
they lead to. 'kubectl skills export' writes the folder back byte for byte.

Git metadata is never bundled: git reads its config and hooks from '.git' and
runs the commands they name (core.fsmonitor runs on 'git status'), so a skill
that shipped one would run its author's commands in every sandbox that calls
git in /skill. Every '.git' entry (folder, file or link, at any depth) is left
out with a warning, so a skill folder that is a git checkout imports as the
skill alone; '.gitignore' and '.gitattributes' are ordinary files. A folder
that holds HEAD beside objects/ and refs/ (a bare repository) is refused.

Each folder is checked with the rules the operator applies. A folder with
problems is left out and each problem is printed to standard error as

  DIR: FIELD: PROBLEM (HINT)

and the command exits with 1; the other folders are still printed. Warnings
(a description over 300 or 1024 characters, long instructions, a byte order
mark) are printed as DIR: warning: FIELD: ... and do not fail the import.

With --recursive, each DIR is a repository: every folder below it that holds a
SKILL.md is a skill (the folders inside a skill folder are its own files).

-n NS writes metadata.namespace: NS into every Skill; without it the manifests
name no namespace and kubectl apply puts them in its own (-n or the context's).
--label KEY=VALUE (repeatable) adds labels, which Agents select skills by.

Size. The API server stores an object of at most 1.5 MiB, so a Skill whose
JSON would exceed 1,500,000 bytes is refused, with the sizes. JSON, as the API
server stores it, writes each '<', '>' and '&' of a text file as 6 bytes and
binary files as base64 (4 bytes for 3), so XML or images weigh more than their
size on disk. Serve the files of such a skill from an OCI image instead, which
the operator mounts read-only as an image volume:

  1. build an image whose root holds the skill folder's files, e.g. from a
     Containerfile in the folder holding 'FROM scratch' and 'COPY . /';
  2. push it, ideally referring to it by digest;
  3. import with --bundle-image REF.

The Skill is then written with spec.bundle.image: REF and no spec.files
(SKILL.md itself stays in the object). Only folders that need it get the
bundle; in REF, {name} is replaced by the skill's name, so one flag serves a
whole repository.

Large Skills (over 256 KiB) must be applied with 'kubectl apply --server-side'
or 'kubectl create': client-side apply copies the object into an annotation,
which is limited to 256 KiB.`

const importExample = `  # Print the Skill of one folder
  kubectl skills import ./pdf-tools

  # Import every skill of a repository into the namespace "agents" and apply them
  kubectl skills import --recursive ./skills -n agents --label team=platform \
    | kubectl apply --server-side -f -

  # A skill with several MB of assets: its files are served from an image
  kubectl skills import ./brand-kit \
    --bundle-image registry.example.com/skills/{name}:v3 > brand-kit.yaml`

// importOptions are the flags of import.
type importOptions struct {
	*cmdline.Options
	recursive    bool
	labels       []string
	bundleImage  string
	maxBodyBytes int
}

func newImportCommand(o *cmdline.Options) *cobra.Command {
	opts := &importOptions{Options: o}
	cmd := &cobra.Command{
		Use:     "import DIR...",
		Short:   "Print Skill manifests for skill folders",
		Long:    importLong,
		Example: importExample,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.run(args)
		},
	}
	flags := cmd.Flags()
	flags.BoolVarP(&opts.recursive, "recursive", "R", false,
		"Treat each DIR as a repository and import every folder below it that holds a SKILL.md")
	flags.StringArrayVar(&opts.labels, "label", nil,
		"Add the label KEY=VALUE to every Skill (repeatable)")
	flags.StringVar(&opts.bundleImage, "bundle-image", "",
		"For a skill too large for the API server, write spec.bundle.image=REF instead of spec.files ({name} becomes the skill's name)")
	addMaxBodyFlag(flags, &opts.maxBodyBytes)
	return cmd
}

// run imports every folder, prints the good ones and reports the others.
func (o *importOptions) run(args []string) error {
	j, err := o.judge()
	if err != nil {
		return err
	}
	var verdicts []*verdict
	for _, arg := range args {
		kind, err := statInput(arg)
		if err == nil && kind != inputFolder {
			err = fmt.Errorf("failed to import %s: it is a file; import reads skill folders (validate and export read manifests)", arg)
		}
		if err != nil {
			v := &verdict{source: arg}
			v.fail(fieldSkillMD, err.Error(), "")
			verdicts = append(verdicts, v)
			continue
		}
		folders, failed := skillFolders(arg, o.recursive)
		if failed != nil {
			verdicts = append(verdicts, failed)
		}
		for _, dir := range folders {
			verdicts = append(verdicts, j.folder(dir))
		}
	}
	o.checkBundleImage(verdicts)
	out := &manifestWriter{w: o.Streams.Out}
	failed := false
	for _, v := range verdicts {
		v.report(o.Streams.ErrOut)
		if !v.ok() {
			failed = true
			continue
		}
		if err := out.write(v.object); err != nil {
			return err
		}
	}
	if failed {
		return cmdline.ErrProblems
	}
	return nil
}

// gitSkipWarnings says which `.git` entries of a folder were left out.
func gitSkipWarnings(skipped []string) []skill.Problem {
	warnings := make([]skill.Problem, 0, len(skipped))
	for _, p := range skipped {
		warnings = append(warnings, skill.Problem{
			Field: fieldFiles,
			Message: fmt.Sprintf("%s was left out: git metadata is never bundled, since git runs the commands "+
				"its config and hooks name", p),
			Hint: "nothing to do for a git checkout; a skill never needs its own .git",
		})
	}
	return warnings
}

// judge builds the judge from the flags, refusing a bad namespace or label.
func (o *importOptions) judge() (*judge, error) {
	j := &judge{namespace: o.FlagNamespace(), bundleImage: o.bundleImage, maxBodyBytes: o.maxBodyBytes, unique: true}
	if j.namespace != "" {
		if errs := validation.IsDNS1123Label(j.namespace); len(errs) > 0 {
			return nil, fmt.Errorf("failed to use namespace %q: %s", j.namespace, strings.Join(errs, "; "))
		}
	}
	labels, err := parseLabels(o.labels)
	if err != nil {
		return nil, err
	}
	j.labels = labels
	if strings.ContainsAny(o.bundleImage, " \t\r\n") {
		return nil, fmt.Errorf("failed to use --bundle-image %q: an image reference holds no spaces", o.bundleImage)
	}
	return j, nil
}

// checkBundleImage refuses one --bundle-image without {name} for several
// skills: each skill needs an image of its own.
func (o *importOptions) checkBundleImage(verdicts []*verdict) {
	if strings.Contains(o.bundleImage, bundleNamePlaceholder) {
		return
	}
	var bundled []*verdict
	for _, v := range verdicts {
		if v.bundled {
			bundled = append(bundled, v)
		}
	}
	if len(bundled) < 2 {
		return
	}
	for _, v := range bundled {
		v.fail(fieldBundle, fmt.Sprintf("--bundle-image names the one image %s for %s", o.bundleImage,
			pluralize(len(bundled), "skill")),
			"put {name} in --bundle-image, for example registry.example.com/skills/{name}:v1, so each skill gets its own image")
	}
}

// parseLabels reads KEY=VALUE labels, checked as the API server would.
func parseLabels(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	labels := make(map[string]string, len(pairs))
	for _, pair := range pairs {
		key, value, found := strings.Cut(pair, "=")
		if !found {
			return nil, fmt.Errorf("failed to parse label %q: write it as KEY=VALUE", pair)
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("failed to parse label %q: the key %s", pair, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return nil, fmt.Errorf("failed to parse label %q: the value %s", pair, strings.Join(errs, "; "))
		}
		labels[key] = value
	}
	return labels, nil
}

// addMaxBodyFlag adds --max-instructions-bytes, the operator's flag of the
// same name, so that a folder is judged as the cluster will judge it.
func addMaxBodyFlag(flags *pflag.FlagSet, p *int) {
	flags.IntVar(p, "max-instructions-bytes", skill.DefaultMaxBodyBytes,
		"Largest SKILL.md body accepted; set it to the operator's --max-instructions-bytes")
}
