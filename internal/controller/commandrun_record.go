package controller

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// The ordering rule of a run's life, stated here once: the status records a
// decision before any side effect that depends on it.
//
// A pass changes the run in memory. Before a side effect that follows from
// what it decided, it calls runPass.then, which writes the status and does
// the side effect only once the API server has stored it. That covers:
//   - the Job: the status names it, with the decision it runs under and the
//     phase moved off AwaitingApproval (to Pending), before it is created;
//     a Job the status does not name is never taken as the run's;
//   - the sandbox's credential: the result is stored before the pod whose
//     token could still be read from it is deleted, so a lost write loses
//     no result.
//
// Every write is conditional on the resourceVersion the pass read: one that
// finds the run changed (an approval or a denial added, another manager's
// write) fails, the side effect is not done, and the next pass starts again
// from what is stored. Admission accepts an approval or a denial only while
// the stored phase is AwaitingApproval, so once a pass has stored that the
// Job is being made, no denial can follow the approval the Job runs on.

// errRunChanged says that the run changed since the pass read it: the pass
// stops, and is tried again on what is stored.
var errRunChanged = errors.New("the CommandRun changed since it was read")

// runPass is one reconcile of a run: the run as last stored, the run as the
// pass changes it, and the Events to emit once its status is stored.
type runPass struct {
	c client.Client
	// stored is the run as the API server holds it, as far as the pass
	// knows: as read, then as each write answered.
	stored *skillsv1.CommandRun
	// run is the run the pass changes.
	run *skillsv1.CommandRun
	// events are emitted by flush, after the pass's last write.
	events []func()
}

func newRunPass(c client.Client, run *skillsv1.CommandRun) *runPass {
	return &runPass{c: c, stored: run.DeepCopy(), run: run}
}

// record writes the run's status when it differs from the stored one, on
// the condition that the run has not changed since: errRunChanged when it
// has. A run deleted meanwhile is NotFound.
func (p *runPass) record(ctx context.Context) error {
	if equality.Semantic.DeepEqual(p.stored.Status, p.run.Status) {
		return nil
	}
	patch := client.MergeFromWithOptions(p.stored, client.MergeFromWithOptimisticLock{})
	err := p.c.Status().Patch(ctx, p.run, patch)
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("failed to patch status of %s: %w", klog.KObj(p.run), errRunChanged)
	case err != nil:
		return fmt.Errorf("failed to patch status of %s: %w", klog.KObj(p.run), err)
	}
	p.stored = p.run.DeepCopy()
	return nil
}

// then records the run's status and, only once it is stored, does act: the
// side effect that depends on it.
func (p *runPass) then(ctx context.Context, act func() error) error {
	if err := p.record(ctx); err != nil {
		return err
	}
	return act()
}

// event queues an Event for flush.
func (p *runPass) event(emit func()) { p.events = append(p.events, emit) }

// flush emits the queued Events, once the pass's status is stored.
func (p *runPass) flush() {
	for _, emit := range p.events {
		emit()
	}
	p.events = nil
}
