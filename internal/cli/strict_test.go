package cli_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
	"github.com/kubeskills/kubeskills/internal/skillsref"
)

// referenceMessages maps each message of `skills-ref validate` to the rule
// it reports.
var referenceMessages = []struct {
	pattern *regexp.Regexp
	rule    skillsref.Rule
}{
	{regexp.MustCompile(`^(Path does not exist|Not a directory): `), skillsref.RuleFolderMissing},
	{regexp.MustCompile(`^Missing required file: SKILL\.md$`), skillsref.RuleSkillMDMissing},
	{regexp.MustCompile(`^SKILL\.md must start with YAML frontmatter \(---\)$`), skillsref.RuleFrontMatterMissing},
	{regexp.MustCompile(`^SKILL\.md frontmatter not properly closed with ---$`), skillsref.RuleFrontMatterNotClosed},
	{regexp.MustCompile(`SKILL\.md frontmatter must be a YAML mapping$`), skillsref.RuleFrontMatterNotMapping},
	{regexp.MustCompile(`(?s)^Invalid YAML in frontmatter: `), skillsref.RuleFrontMatterYAML},
	{regexp.MustCompile(`(?s)^Unexpected fields in frontmatter: `), skillsref.RuleFieldsUnexpected},
	{regexp.MustCompile(`^Missing required field in frontmatter: name$`), skillsref.RuleNameMissing},
	{regexp.MustCompile(`^Field 'name' must be a non-empty string$`), skillsref.RuleNameEmpty},
	{regexp.MustCompile(`(?s)^Skill name '.*' exceeds 64 character limit \(\d+ chars\)$`), skillsref.RuleNameTooLong},
	{regexp.MustCompile(`(?s)^Skill name '.*' must be lowercase$`), skillsref.RuleNameLowercase},
	{regexp.MustCompile(`^Skill name cannot start or end with a hyphen$`), skillsref.RuleNameHyphenEdge},
	{regexp.MustCompile(`^Skill name cannot contain consecutive hyphens$`), skillsref.RuleNameConsecutiveHyphens},
	{regexp.MustCompile(`(?s)^Skill name '.*' contains invalid characters\. `), skillsref.RuleNameCharacters},
	{regexp.MustCompile(`(?s)^Directory name '.*' must match skill name '.*'$`), skillsref.RuleNameFolder},
	{regexp.MustCompile(`^Missing required field in frontmatter: description$`), skillsref.RuleDescriptionMissing},
	{regexp.MustCompile(`^Field 'description' must be a non-empty string$`), skillsref.RuleDescriptionEmpty},
	{regexp.MustCompile(`^Description exceeds 1024 character limit \(\d+ chars\)$`), skillsref.RuleDescriptionTooLong},
	{regexp.MustCompile(`^Field 'compatibility' must be a string$`), skillsref.RuleCompatibilityType},
	{regexp.MustCompile(`^Compatibility exceeds 500 character limit \(\d+ chars\)$`), skillsref.RuleCompatibilityTooLong},
	{regexp.MustCompile(`(?s)^Error: `), skillsref.RuleSkillMDUnreadable},
}

// strictLine finds the rule of each --strict error that validate prints.
var strictLine = regexp.MustCompile(`(?m)^.*?: [a-zA-Z.\[\]0-9_]+: skills-ref ([a-z0-9-]+): `)

// TestStrictAgreesWithSkillsRef runs the reference validator, the npm package
// skills-ref at the version hack/skills-ref/package-lock.json pins, and
// `kubectl skills validate --strict` side by side over every skill folder of
// the repository (the samples, the example repository, the chart's skills,
// the testdata folders) and the folders under testdata/strict, written to
// break each rule. Folder by folder, both must find the same rules broken,
// and so give the same verdict.
func TestStrictAgreesWithSkillsRef(t *testing.T) {
	ref := skillsRefCommand(t)
	hit := map[skillsref.Rule]bool{}
	for _, dir := range strictFolders(t) {
		rel, _ := filepath.Rel(clitest.RepoRoot(), dir)
		t.Run(rel, func(t *testing.T) {
			want := runSkillsRef(t, ref, dir)
			for _, r := range want {
				hit[r] = true
			}
			var got []skillsref.Rule
			for _, v := range skillsref.CheckFolder(dir) {
				got = append(got, v.Rule)
			}
			if !sameRules(got, want) {
				t.Errorf("skillsref.CheckFolder finds %q, skills-ref %q", got, want)
			}

			res := clitest.Run("", "validate", "--strict", dir)
			var printed []skillsref.Rule
			for _, m := range strictLine.FindAllStringSubmatch(res.Stdout, -1) {
				printed = append(printed, skillsref.Rule(m[1]))
			}
			if !sameRules(printed, want) {
				t.Errorf("validate --strict reports %q, skills-ref %q:\n%s", printed, want, res.Stdout)
			}
			plain := clitest.Run("", "validate", dir)
			switch {
			case len(want) > 0 && res.Code != cli.ExitFailed:
				t.Errorf("validate --strict exited %d for a folder skills-ref refuses:\n%s", res.Code, res.Stdout)
			case len(want) == 0 && plain.Code == cli.ExitOK && res.Code != cli.ExitOK:
				t.Errorf("validate --strict exited %d for a folder both accept:\n%s", res.Code, res.Stdout)
			}
			if strings.Contains(res.Stdout, "outside the six") && strings.Contains(res.Stdout, "warning: spec.frontMatter") {
				t.Errorf("validate --strict repeats an error as a warning:\n%s", res.Stdout)
			}
		})
	}
	for _, rule := range skillsref.Rules {
		if !hit[rule] && rule != skillsref.RuleFolderMissing {
			t.Errorf("no folder breaks the rule %s: add one under internal/cli/testdata/strict", rule)
		}
	}
}

// skillsRefCommand installs the pinned skills-ref with hack/skills-ref.sh
// (cached in bin/) and returns its command. The test fails, rather than
// skips, when node or npm is missing.
func skillsRefCommand(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(clitest.RepoRoot(), "hack", "skills-ref.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/skills-ref.sh could not install the reference validator: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// runSkillsRef runs `skills-ref validate DIR` and returns the rules its
// messages report, none when it says the skill is valid. It runs in UTC,
// since it writes dates in the local time zone.
func runSkillsRef(t *testing.T, ref, dir string) []skillsref.Rule {
	t.Helper()
	cmd := exec.Command(ref, "validate", dir)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		if stderr.Len() > 0 || !strings.HasPrefix(stdout.String(), "Valid skill: ") {
			t.Fatalf("skills-ref exited 0 with stdout %q, stderr %q", stdout.String(), stderr.String())
		}
		return nil
	case !errors.As(err, &exit) || exit.ExitCode() != 1:
		t.Fatalf("skills-ref failed: %v\n%s", err, stderr.String())
	}
	header, list, ok := strings.Cut(stderr.String(), ":\n  - ")
	if !ok || !strings.HasPrefix(header, "Validation failed for ") {
		t.Fatalf("skills-ref exited 1 with stderr %q", stderr.String())
	}
	var rules []skillsref.Rule
	for _, message := range strings.Split(strings.TrimSuffix(list, "\n"), "\n  - ") {
		rule, found := skillsref.Rule(""), false
		for _, m := range referenceMessages {
			if m.pattern.MatchString(message) {
				rule, found = m.rule, true
				break
			}
		}
		if !found {
			t.Fatalf("skills-ref reports %q, which no rule matches", message)
		}
		rules = append(rules, rule)
	}
	return rules
}

// strictFolders lists the folders to judge: every folder holding a SKILL.md
// in the repository outside bin/ and .git, and every folder under
// internal/cli/testdata/strict.
func strictFolders(t *testing.T) []string {
	t.Helper()
	root := clitest.RepoRoot()
	strict := filepath.Join(root, "internal", "cli", "testdata", "strict")
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && (path == filepath.Join(root, "bin") || d.Name() == ".git" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case d.IsDir() && filepath.Dir(path) == strict:
			dirs = append(dirs, path)
			return filepath.SkipDir
		case !d.IsDir() && d.Name() == "SKILL.md" && !strings.HasPrefix(path, strict+string(filepath.Separator)):
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"config/samples/skills", "internal/skill/testdata/skills", "internal/cli/testdata/strict"} {
		if !slices.ContainsFunc(dirs, func(d string) bool { return strings.HasPrefix(d, filepath.Join(root, want)) }) {
			t.Fatalf("no skill folder found under %s", want)
		}
	}
	return dirs
}

func sameRules(a, b []skillsref.Rule) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestValidateWarnsAboutKeysOutsideTheSpecification: without --strict, keys
// outside the six of the specification and a description over 1024
// characters are warnings (the input is valid); with --strict, they are the
// reference validator's errors, and the warnings are not repeated.
func TestValidateWarnsAboutKeysOutsideTheSpecification(t *testing.T) {
	dir := clitest.WriteFolder(t, filepath.Join(t.TempDir(), "portable"), map[string]string{
		"SKILL.md": "---\nname: portable\ndescription: " + strings.Repeat("d", 1025) +
			"\nuser-invocable: true\ndisable-model-invocation: true\n---\n\n# Portable\n",
	})
	res := clitest.Run("", "validate", dir)
	wants := []string{
		dir + `: warning: spec.frontMatter: the front matter has 2 keys outside the six of the Agent Skills specification: "user-invocable" (line 4), "disable-model-invocation" (line 5) (`,
		dir + ": warning: spec.description: the description is 1025 characters long, more than the 1024 of the Agent Skills specification",
		dir + ": valid (skill portable)",
	}
	for _, want := range wants {
		if res.Code != cli.ExitOK || !strings.Contains(res.Stdout, want) {
			t.Errorf("validate: exit %d, stdout lacks %q:\n%s", res.Code, want, res.Stdout)
		}
	}

	res = clitest.Run("", "validate", "--strict", dir)
	wants = []string{
		dir + `: spec.frontMatter: skills-ref fields-unexpected: the front matter has keys outside the six of the Agent Skills specification: "disable-model-invocation", "user-invocable" (`,
		dir + ": spec.description: skills-ref description-too-long: the description is 1025 characters long (in UTF-16 code units), more than 1024 (",
	}
	for _, want := range wants {
		if res.Code != cli.ExitFailed || !strings.Contains(res.Stdout, want) {
			t.Errorf("validate --strict: exit %d, stdout lacks %q:\n%s", res.Code, want, res.Stdout)
		}
	}
	if strings.Contains(res.Stdout, "warning:") {
		t.Errorf("validate --strict repeats its errors as warnings:\n%s", res.Stdout)
	}
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if !problemLine.MatchString(line) {
			t.Errorf("line %q is not PATH: FIELD: PROBLEM", line)
		}
	}
}

// TestValidateStrictManifest judges a manifest's Skills as the folders
// export would write: the rendered SKILL.md in a folder named after the
// object.
func TestValidateStrictManifest(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "skills.yaml")
	const text = `apiVersion: kubeskills.io/v1alpha1
kind: Skill
metadata:
  name: generated
spec:
  description: Front matter generated from the fields.
  instructions: "# Generated\n"
  compatibility: Needs kubectl.
---
apiVersion: kubeskills.io/v1alpha1
kind: Skill
metadata:
  name: explicit
spec:
  description: Used only when named.
  invocation: Explicit
  instructions: "# Explicit\n"
`
	if err := os.WriteFile(manifest, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	res := clitest.Run("", "validate", manifest)
	if res.Code != cli.ExitOK || !strings.Contains(res.Stdout, manifest+`#2: warning: spec.frontMatter: the front matter has a key outside the six of the Agent Skills specification: "disable-model-invocation" (`) {
		t.Errorf("validate: exit %d:\n%s", res.Code, res.Stdout)
	}
	res = clitest.Run("", "validate", "--strict", manifest)
	wants := []string{
		manifest + "#1: valid (skill generated)",
		manifest + `#2: spec.frontMatter: skills-ref fields-unexpected: the front matter has keys outside the six of the Agent Skills specification: "disable-model-invocation"`,
	}
	for _, want := range wants {
		if res.Code != cli.ExitFailed || !strings.Contains(res.Stdout, want) {
			t.Errorf("validate --strict: exit %d, stdout lacks %q:\n%s", res.Code, want, res.Stdout)
		}
	}
}

func TestValidateHelpStrict(t *testing.T) {
	res := clitest.Run("", "validate", "--help")
	for _, want := range []string{"--strict", "skills-ref 0.1.5", "PATH: FIELD: skills-ref RULE: PROBLEM (HINT)", "UTF-16"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("validate --help lacks %q", want)
		}
	}
}
