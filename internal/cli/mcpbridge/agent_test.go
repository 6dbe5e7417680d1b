package mcpbridge

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func testAgentObject(spec, status map[string]any) *unstructured.Unstructured {
	obj := map[string]any{"metadata": map[string]any{"name": "ops", "namespace": "agents"}}
	if spec != nil {
		obj["spec"] = spec
	}
	if status != nil {
		obj["status"] = status
	}
	return &unstructured.Unstructured{Object: obj}
}

func TestMCPEnabled(t *testing.T) {
	for name, tc := range map[string]struct {
		spec map[string]any
		want bool
	}{
		"no spec.mcp, as before the field": {map[string]any{}, true},
		"mcp without enabled":              {map[string]any{"mcp": map[string]any{}}, true},
		"enabled":                          {map[string]any{"mcp": map[string]any{"enabled": true}}, true},
		"disabled":                         {map[string]any{"mcp": map[string]any{"enabled": false}}, false},
		"not a bool":                       {map[string]any{"mcp": map[string]any{"enabled": "no"}}, true},
	} {
		if got := mcpEnabled(testAgentObject(tc.spec, nil)); got != tc.want {
			t.Errorf("%s: mcpEnabled = %v, want %v", name, got, tc.want)
		}
	}
}

func TestTokenSecretName(t *testing.T) {
	for name, tc := range map[string]struct {
		spec, status map[string]any
		want         string
	}{
		"default":        {nil, nil, "ops-token"},
		"spec names one": {map[string]any{"access": map[string]any{"tokenSecretName": "mine"}}, nil, "mine"},
		"status first": {
			map[string]any{"access": map[string]any{"tokenSecretName": "mine"}},
			map[string]any{"tokenSecretName": "served"}, "served",
		},
		"auth disabled": {map[string]any{"access": map[string]any{"disableAuth": true}}, map[string]any{"tokenSecretName": "stale"}, ""},
	} {
		if got := tokenSecretName(testAgentObject(tc.spec, tc.status)); got != tc.want {
			t.Errorf("%s: tokenSecretName = %q, want %q", name, got, tc.want)
		}
	}
}

func TestPickReadyPod(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(name string, age time.Duration, phase corev1.PodPhase, ready, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))}}
		p.Status.Phase = phase
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		return p
	}
	for name, tc := range map[string]struct {
		pods []corev1.Pod
		want string
	}{
		"none":        {nil, ""},
		"none ready":  {[]corev1.Pod{pod("a", time.Hour, corev1.PodRunning, false, false), pod("b", time.Hour, corev1.PodPending, false, false)}, ""},
		"terminating": {[]corev1.Pod{pod("a", time.Hour, corev1.PodRunning, true, true)}, ""},
		"oldest ready": {[]corev1.Pod{
			pod("young", time.Minute, corev1.PodRunning, true, false),
			pod("old", time.Hour, corev1.PodRunning, true, false),
			pod("older-unready", 2*time.Hour, corev1.PodRunning, false, false),
		}, "old"},
		"same age, by name": {[]corev1.Pod{pod("b", time.Hour, corev1.PodRunning, true, false), pod("a", time.Hour, corev1.PodRunning, true, false)}, "a"},
	} {
		got := ""
		if p := pickReadyPod(tc.pods); p != nil {
			got = p.Name
		}
		if got != tc.want {
			t.Errorf("%s: picked %q, want %q", name, got, tc.want)
		}
	}
}

func TestPodPortFor(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "agent", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}, {Name: "http", ContainerPort: 8080}}},
	}}}
	for name, tc := range map[string]struct {
		port    corev1.ServicePort
		want    int32
		wantErr bool
	}{
		"named target":   {corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("http")}, 8080, false},
		"numbered":       {corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8081)}, 8081, false},
		"no target":      {corev1.ServicePort{Port: 80}, 80, false},
		"unknown name":   {corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("api")}, 0, true},
		"other name hit": {corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("metrics")}, 9090, false},
	} {
		got, err := podPortFor(pod, tc.port)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: podPortFor = %d, %v; want %d, error %v", name, got, err, tc.want, tc.wantErr)
		}
	}
}
