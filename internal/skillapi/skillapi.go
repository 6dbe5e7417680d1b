// Package skillapi converts between the Skill API object and the pure
// skill.Skill, so the operator and the kubectl plugin judge a skill with the
// same code.
package skillapi

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// FromObject returns the skill an object describes, and the problems that
// the API schema cannot catch in the conversion itself (a file with both or
// neither of content and binaryContent).
func FromObject(obj *skillsv1.Skill) (*skill.Skill, []skill.Problem) {
	spec := &obj.Spec
	s := &skill.Skill{
		Name:          obj.Name,
		Description:   spec.Description,
		License:       spec.License,
		Compatibility: spec.Compatibility,
		AllowedTools:  spec.AllowedTools,
		Metadata:      spec.Metadata,
		Invocation:    string(spec.Invocation),
		FrontMatter:   spec.FrontMatter,
		Body:          spec.Instructions,
	}
	var problems []skill.Problem
	budget := int64(MaxDecompressedBytes)
	for i, f := range spec.Files {
		file := skill.File{Path: f.Path, Executable: f.Executable}
		switch {
		case f.Compression != "":
			content, p := decompress(i, f, budget)
			if p != nil {
				problems = append(problems, *p)
			}
			budget -= int64(len(content))
			file.Content = content
		case f.Content != nil && f.BinaryContent != nil:
			problems = append(problems, skill.Problem{
				Field:   fmt.Sprintf("spec.files[%d]", i),
				Message: "both content and binaryContent are set",
				Hint:    "keep content for text and binaryContent for other bytes",
			})
		case f.Content != nil:
			file.Content = []byte(*f.Content)
		case f.BinaryContent != nil:
			file.Content = f.BinaryContent
		default:
			problems = append(problems, skill.Problem{
				Field:   fmt.Sprintf("spec.files[%d]", i),
				Message: "neither content nor binaryContent is set",
				Hint:    "set content for text or binaryContent for other bytes; an empty file is content: \"\"",
			})
		}
		s.Files = append(s.Files, file)
	}
	return s, problems
}

// decompress returns the bytes of a compressed file, at most budget of them.
func decompress(i int, f skillsv1.SkillFile, budget int64) ([]byte, *skill.Problem) {
	field := fmt.Sprintf("spec.files[%d]", i)
	if f.Content != nil || f.BinaryContent == nil {
		return nil, &skill.Problem{Field: field, Message: "compression is set but the file is not in binaryContent",
			Hint: "put the compressed bytes in binaryContent, or drop compression"}
	}
	content, err := gunzip(f.BinaryContent, max(budget, 0))
	if err != nil {
		return nil, &skill.Problem{Field: field + ".binaryContent", Message: fmt.Sprintf("cannot be decompressed as %s: %v", f.Compression, err),
			Hint: fmt.Sprintf("the compressed files of a skill may expand to %d MiB in all; serve larger bundles from an OCI image with spec.bundle.image", MaxDecompressedBytes>>20)}
	}
	return content, nil
}

// ToObject returns the Skill object for a skill, in a namespace. Text files
// that server-side apply carries unchanged (skill.ApplySafeText) are stored
// as content, other files as binaryContent.
func ToObject(s *skill.Skill, namespace string) *skillsv1.Skill {
	obj := &skillsv1.Skill{
		TypeMeta:   metav1.TypeMeta{APIVersion: skillsv1.GroupVersion.String(), Kind: "Skill"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: namespace},
		Spec: skillsv1.SkillSpec{
			Description:   s.Description,
			Instructions:  s.Body,
			License:       s.License,
			Compatibility: s.Compatibility,
			AllowedTools:  s.AllowedTools,
			Metadata:      s.Metadata,
			FrontMatter:   s.FrontMatter,
		},
	}
	if s.Invocation != skill.InvocationAuto {
		obj.Spec.Invocation = skillsv1.InvocationMode(s.Invocation)
	}
	for _, f := range s.Files {
		file := skillsv1.SkillFile{Path: f.Path, Executable: f.Executable}
		if skill.ApplySafeText(f.Content) {
			content := string(f.Content)
			file.Content = &content
		} else {
			file.BinaryContent = f.Content
		}
		obj.Spec.Files = append(obj.Spec.Files, file)
	}
	return obj
}
