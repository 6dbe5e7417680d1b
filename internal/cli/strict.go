package cli

import (
	"slices"

	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillsref"
)

// strictFolder adds to a folder's verdict every rule of the Agent Skills
// reference validator the folder breaks, as errors.
func strictFolder(v *verdict, dir string) {
	addStrict(v, skillsref.CheckFolder(dir))
}

// strictObject adds to an object's verdict every rule of the reference
// validator that the folder `kubectl skills export` would write breaks: its
// SKILL.md is the rendered skill, its folder is named after the object.
func strictObject(v *verdict, s *skill.Skill, name string) {
	addStrict(v, skillsref.Check(skill.Render(s), name))
}

// addStrict turns the violations into errors. The warnings about rules the
// reference validator enforces go: the violations say the same, as errors.
func addStrict(v *verdict, violations []skillsref.Violation) {
	v.warnings = slices.DeleteFunc(v.warnings, func(p skill.Problem) bool { return p.Portability })
	for _, violation := range violations {
		v.errors = append(v.errors, violation.Problem())
	}
}
