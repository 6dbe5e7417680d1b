package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// TestCreateValidation_SkillRefusesGitMetadata: the API server refuses a
// Skill that bundles git metadata (.git/config with core.fsmonitor runs its
// author's command on `git status` in /skill), naming the field, whatever
// the depth or case of the `.git` segment; .gitignore, .gitattributes and
// names that only contain ".git" stay ordinary files.
func TestCreateValidation_SkillRefusesGitMetadata(t *testing.T) {
	const msg = "spec.files[].path must not contain a '.git' segment"
	cases := []struct {
		name, path string
		refused    bool
	}{
		{"git-config", ".git/config", true},
		{"git-hook", "a/.git/hooks/post-checkout", true},
		{"git-file", ".git", true},
		{"git-file-nested", "sub/.git", true},
		{"git-upper", ".GIT/config", true},
		{"git-mixed", "x/.Git/HEAD", true},
		{"gitignore", ".gitignore", false},
		{"gitattributes", "docs/.gitattributes", false},
		{"github", ".github/workflows/ci.yml", false},
		{"dot-git-suffix", "repo.git/config", false},
		{"git-prefix", ".gitkeep", false},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := skill("files-"+tc.name, func(s *skillsv1.Skill) { s.Spec.Files = []skillsv1.SkillFile{file(tc.path, "x")} })
			err := env.Client.Create(ctx, obj)
			if !tc.refused {
				if err != nil {
					t.Fatalf("want %s accepted, got: %v", tc.path, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %s refused with %q, it was accepted", tc.path, msg)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), msg) {
				t.Fatalf("want an Invalid error containing %q, got: %v", msg, err)
			}
		})
	}
}
