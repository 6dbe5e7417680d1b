package testenv

import (
	"context"
	"fmt"
	"hash/fnv"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// RefuseStatusWrites has the API server refuse, in namespace ns, every
// write of the status of the kubeskills resource (e.g. "commandruns") for
// which the CEL expression refused is true of the written object, as a
// write lost to a network fault or an API server restart would be: the
// writer gets Forbidden. It returns a function that lifts the refusal. The
// refusal comes into force a moment later: callers probe for it.
func (e *Env) RefuseStatusWrites(ctx context.Context, ns, resource, refused string) (lift func(), err error) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(refused))
	name := fmt.Sprintf("test-refuse-%s-status-%s-%08x", resource, ns, h.Sum32())
	pol := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{"kubeskills.io"}, APIVersions: []string{"*"},
						Resources: []string{resource + "/status"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!(%s)", refused),
				Message:    "status writes where " + refused + " are refused",
				Reason:     ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	if err := e.Client.Create(ctx, pol); err != nil {
		return nil, fmt.Errorf("failed to create ValidatingAdmissionPolicy %s: %w", name, err)
	}
	if err := e.Client.Create(ctx, binding); err != nil {
		_ = e.Client.Delete(ctx, pol)
		return nil, fmt.Errorf("failed to create ValidatingAdmissionPolicyBinding %s: %w", name, err)
	}
	return func() {
		_ = e.Client.Delete(context.Background(), binding)
		_ = e.Client.Delete(context.Background(), pol)
	}, nil
}
