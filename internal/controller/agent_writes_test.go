package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/operatortest"
)

// TestAgentUnchangedWritesNothing: once an Agent's objects are as its spec
// says, a pass writes nothing: not its ServiceAccount, Role, RoleBinding,
// Service, NetworkPolicy or Deployment, not its catalog, not its status,
// not an Event. The reconciler runs here as the operator, on a cache of its
// own, beside the running manager; its first pass remembers nothing, as
// after a restart, and may apply; the next must not.
func TestAgentUnchangedWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := agentSetup(t)
	waitAgent(t, ns, "health", "triage")

	op, err := env.InstallOperatorConfig(ctx, "rbac")
	g.Expect(err).NotTo(HaveOccurred())
	cache, err := crcache.New(op.Config, crcache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]crcache.Config{ns: {}}})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = cache.Start(ctx) }()
	g.Expect(cache.WaitForCacheSync(ctx)).To(BeTrue())
	cached, err := client.NewWithWatch(op.Config, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: cache}})
	g.Expect(err).NotTo(HaveOccurred())
	direct, err := client.New(op.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	counter := &writeCounter{}
	r := &controller.AgentReconciler{Client: counter.client(cached), APIReader: direct, Recorder: counter,
		Image: operatortest.Image, Policies: &controller.PolicyCache{}}
	req := reconcile.Request{NamespacedName: keyOf(ns, "ops")}

	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	counter.counted()
	// The next pass reads what the first wrote: the cache must hold it.
	g.Eventually(func(g Gomega) {
		_, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		writes, events := counter.counted()
		g.Expect(writes).To(BeEmpty())
		g.Expect(events).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
	for range 3 {
		_, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		writes, events := counter.counted()
		g.Expect(writes).To(BeEmpty())
		g.Expect(events).To(BeEmpty())
	}
}
