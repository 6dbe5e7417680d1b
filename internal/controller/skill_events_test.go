package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
)

// withReason keeps the Events of one reason.
func withReason(evs []eventsv1.Event, reason string) []eventsv1.Event {
	var out []eventsv1.Event
	for _, e := range evs {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// TestSkillServedEventOnlyOnRecovery: serving what the author asked for (a
// first serve, a valid edit) is said by the status alone; a Served Event
// comes only when a Skill is served again after a refused generation, so
// that its Events do not end on a Warning that no longer holds.
func TestSkillServedEventOnlyOnRecovery(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := newSkill(ns, "crashloop-triage")
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
	first := waitSkillState(t, ns, obj.Name, metav1.ConditionTrue, skillsv1.ReconciledReason)
	g.Expect(first.Status.ServedGeneration).To(Equal(int64(1)))

	// A refused edit: a Warning. It is emitted after the first serve, so
	// once it is listed, an Event of the first serve would be too.
	update(t, ns, obj.Name, func(s *skillsv1.Skill) { s.Spec.Instructions = " \n" })
	waitSkillState(t, ns, obj.Name, metav1.ConditionFalse, skillsv1.ValidationFailedReason)
	g.Eventually(func(g Gomega) {
		g.Expect(withReason(events(g, first), skillsv1.ValidationFailedReason)).To(ConsistOf(
			HaveField("Type", corev1.EventTypeWarning)))
	}, timeout, interval).Should(Succeed())
	g.Expect(withReason(events(g, first), "Served")).To(BeEmpty(), "the first serve emits no Event")

	// The fix: served again, and one Served Event says the problems are
	// resolved.
	update(t, ns, obj.Name, func(s *skillsv1.Skill) { s.Spec.Instructions = "# Crash loops\n\nRead the log.\n" })
	fixed := waitSkillState(t, ns, obj.Name, metav1.ConditionTrue, skillsv1.ReconciledReason)
	g.Expect(fixed.Status.ServedGeneration).To(Equal(int64(3)))
	g.Eventually(func(g Gomega) {
		g.Expect(withReason(events(g, fixed), "Served")).To(ConsistOf(And(
			HaveField("Type", corev1.EventTypeNormal),
			HaveField("Note", HavePrefix("Serving generation 3 (")),
			HaveField("Note", HaveSuffix("the problems reported before are resolved")))))
	}, timeout, interval).Should(Succeed())

	// A valid edit is served without an Event; the refused edit after it
	// brings its Warning, and still only the one Served Event.
	update(t, ns, obj.Name, func(s *skillsv1.Skill) { s.Spec.Instructions = "# Crash loops\n\nRead the previous log.\n" })
	edited := waitSkillState(t, ns, obj.Name, metav1.ConditionTrue, skillsv1.ReconciledReason)
	g.Expect(edited.Status.ServedGeneration).To(Equal(int64(4)))
	update(t, ns, obj.Name, func(s *skillsv1.Skill) { s.Spec.Instructions = "" })
	waitSkillState(t, ns, obj.Name, metav1.ConditionFalse, skillsv1.ValidationFailedReason)
	g.Eventually(func(g Gomega) {
		g.Expect(withReason(events(g, edited), skillsv1.ValidationFailedReason)).To(ContainElement(
			HaveField("Note", HavePrefix("Generation 5 is invalid; generation 4 is still served."))))
	}, timeout, interval).Should(Succeed())
	g.Expect(withReason(events(g, edited), "Served")).To(HaveLen(1), "a valid edit emits no Event")
}

// TestSkillServedEventAfterInvalidSource: a Skill whose source ConfigMap
// held no valid skill is served again once the source is fixed, and says
// so with a Served Event.
func TestSkillServedEventAfterInvalidSource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	cm := sourceConfigMap(ns, "dns-debug", map[string]string{"SKILL.md": sourceMD})
	g.Expect(k8s.Create(ctx, cm)).To(Succeed())
	waitSkillState(t, ns, "dns-debug", metav1.ConditionTrue, skillsv1.ReconciledReason)

	setSource := func(md string) {
		g.Eventually(func() error {
			got := &corev1.ConfigMap{}
			if err := k8s.Get(ctx, keyOf(ns, "dns-debug"), got); err != nil {
				return err
			}
			got.Data["SKILL.md"] = md
			return k8s.Update(ctx, got)
		}, timeout, interval).Should(Succeed())
	}
	setSource("no front matter at all\n")
	s := waitSkillState(t, ns, "dns-debug", metav1.ConditionFalse, skillsv1.SourceInvalidReason)
	g.Eventually(func(g Gomega) {
		g.Expect(withReason(events(g, s), skillsv1.SourceInvalidReason)).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())
	g.Expect(withReason(events(g, s), "Served")).To(BeEmpty())

	setSource(sourceMD + "\nAlso read /etc/resolv.conf.\n")
	s = waitSkillState(t, ns, "dns-debug", metav1.ConditionTrue, skillsv1.ReconciledReason)
	g.Eventually(func(g Gomega) {
		g.Expect(withReason(events(g, s), "Served")).To(ConsistOf(
			HaveField("Note", ContainSubstring("the problems reported before are resolved"))))
	}, timeout, interval).Should(Succeed())
}

// writeCounter counts the writes a client makes and the Events a recorder
// is asked for.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
	events []string
}

func (w *writeCounter) add(list *[]string, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*list = append(*list, what)
}

func (w *writeCounter) counted() (writes, events []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	writes, events = w.writes, w.events
	w.writes, w.events = nil, nil
	return writes, events
}

// client wraps c: every write is counted, then made.
func (w *writeCounter) client(c client.WithWatch) client.WithWatch {
	name := func(verb string, obj any) string { return fmt.Sprintf("%s %T", verb, obj) }
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add(&w.writes, name("create", obj))
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add(&w.writes, name("update", obj))
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.add(&w.writes, name("patch", obj))
			return c.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			w.add(&w.writes, name("apply", obj))
			return c.Apply(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add(&w.writes, name("delete", obj))
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.add(&w.writes, name("update "+sub, obj))
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add(&w.writes, name("patch "+sub, obj))
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			w.add(&w.writes, name("apply "+sub, obj))
			return c.SubResource(sub).Apply(ctx, obj, opts...)
		},
	})
}

// Eventf and AnnotatedEventf make w a recorder.EventRecorder.
func (w *writeCounter) Eventf(_, _ runtime.Object, eventtype, reason, _, _ string, _ ...any) {
	w.add(&w.events, eventtype+" "+reason)
}

func (w *writeCounter) AnnotatedEventf(_, _ runtime.Object, _ map[string]string, eventtype, reason, _, _ string, _ ...any) {
	w.add(&w.events, eventtype+" "+reason)
}

// TestSkillUnchangedWritesNothing: a pass that finds nothing changed
// writes nothing: not the ConfigMap, not the status, not an Event. The
// reconciler runs here as the operator, on a cache of its own, beside the
// running manager; a new reconciler remembers nothing, as after a restart,
// and must confirm the served ConfigMap by reading it, not by writing it
// again.
func TestSkillUnchangedWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := namespace(t)
	obj := newSkill(ns, "crashloop-triage")
	g.Expect(k8s.Create(ctx, obj)).To(Succeed())
	waitSkillState(t, ns, obj.Name, metav1.ConditionTrue, skillsv1.ReconciledReason)

	// Someone labels the served ConfigMap: its content is still the Skill's.
	g.Eventually(func() error {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, keyOf(ns, "skill-crashloop-triage"), cm); err != nil {
			return err
		}
		cm.Labels["team"] = "sre"
		return k8s.Update(ctx, cm)
	}, timeout, interval).Should(Succeed())

	op, err := env.InstallOperatorConfig(ctx, "rbac")
	g.Expect(err).NotTo(HaveOccurred())
	cache, err := crcache.New(op.Config, crcache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]crcache.Config{ns: {}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cache.IndexField(ctx, controller.ConfigMapMetadata(), controller.IndexConfigMapSkill, controller.ExtraShardsOf)).To(Succeed())
	go func() { _ = cache.Start(ctx) }()
	g.Expect(cache.WaitForCacheSync(ctx)).To(BeTrue())
	cached, err := client.NewWithWatch(op.Config, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: cache}})
	g.Expect(err).NotTo(HaveOccurred())
	direct, err := client.New(op.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	counter := &writeCounter{}
	r := &controller.SkillReconciler{Client: counter.client(cached), APIReader: direct, Recorder: counter}
	req := reconcile.Request{NamespacedName: keyOf(ns, obj.Name)}

	// The cache must hold the label before a pass means anything.
	g.Eventually(func(g Gomega) {
		meta := controller.ConfigMapMetadata()
		g.Expect(cache.Get(ctx, keyOf(ns, "skill-crashloop-triage"), meta)).To(Succeed())
		g.Expect(meta.Labels).To(HaveKey("team"))
	}, timeout, interval).Should(Succeed())
	for _, pass := range []string{"after a restart", "a second pass"} {
		_, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		writes, events := counter.counted()
		g.Expect(writes).To(BeEmpty(), pass)
		g.Expect(events).To(BeEmpty(), pass)
	}

	// The counter sees the writes made through it.
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "skill-crashloop-triage"), cm)).To(Succeed())
	cm.Labels["team"] = "platform"
	g.Expect(r.Update(ctx, cm)).To(Succeed())
	writes, _ := counter.counted()
	g.Expect(writes).To(Equal([]string{"update *v1.ConfigMap"}))
}

// TestSkillEventsFollowTheStoredStatus: a Skill's Events say what its
// stored status says, so they are emitted only once the status is written:
// while the API server refuses the status of a refused generation, no
// Warning is emitted; once it takes it, the Warning comes.
func TestSkillEventsFollowTheStoredStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	lift, err := env.RefuseStatusWrites(ctx, ns, "skills",
		"has(object.status) && has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Stalled' && c.status == 'True')")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(lift)
	// In force once a probe's Stalled status is refused.
	probe := newSkill(ns, "probe")
	g.Expect(k8s.Create(ctx, probe)).To(Succeed())
	stalled := fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Stalled","status":"True","reason":"Probe","message":"probe","lastTransitionTime":%q}]}}`,
		metav1.Now().UTC().Format("2006-01-02T15:04:05Z"))
	g.Eventually(func() error {
		return k8s.Status().Patch(ctx, probe, client.RawPatch("application/merge-patch+json", stalled))
	}, timeout, interval).Should(Satisfy(apierrors.IsForbidden), "the refusal never came into force")

	obj := newSkill(ns, "crashloop-triage")
	obj.Spec.Instructions = " \n"
	g.Expect(k8s.Create(ctx, obj)).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(withReason(events(g, obj), skillsv1.ValidationFailedReason)).To(BeEmpty(),
			"an Event said what the stored status does not")
	}, 2*time.Second, interval).Should(Succeed())
	lift()
	waitSkillState(t, ns, obj.Name, metav1.ConditionFalse, skillsv1.ValidationFailedReason)
	g.Eventually(func(g Gomega) {
		g.Expect(withReason(events(g, obj), skillsv1.ValidationFailedReason)).To(HaveLen(1))
	}, timeout, interval).Should(Succeed())
}
