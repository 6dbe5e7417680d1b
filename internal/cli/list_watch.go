package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/approval"
)

// follower prints the runs awaiting approval, then follows the cluster:
// a row for each run that comes to await approval, and one for each that
// leaves it (with its new phase, or Deleted).
//
// It lists the runs page by page, then watches from the list's
// resourceVersion with client-go's RetryWatcher, which starts the watch
// again from the last version seen whenever the API server ends it. When
// the server no longer has that version (410 Gone, "too old resource
// version"), the follower lists again, prints what changed in between,
// and watches from the new list.
type follower struct {
	c      client.WithWatch
	opts   []client.ListOption
	where  string
	out    io.Writer
	errOut io.Writer
	table  runTable
	// shown are the runs printed as awaiting approval, by namespace/name.
	shown map[client.ObjectKey]skillsv1.CommandRun
}

// run follows until ctx is done or the process is interrupted.
func (f *follower) run(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The RetryWatcher logs the watches it starts again through klog; the
	// command speaks only through its table and its error.
	ctx = klog.NewContext(ctx, logr.Discard())
	f.shown = map[client.ObjectKey]skillsv1.CommandRun{}
	rv, err := f.list(ctx, true)
	for err == nil {
		rv, err = f.watchFrom(ctx, rv)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// list lists the runs and prints what changed since the runs shown: on the
// first list, the table of the runs awaiting approval. It returns the
// list's resourceVersion.
func (f *follower) list(ctx context.Context, first bool) (string, error) {
	runs, rv, err := listRuns(ctx, f.c, f.opts)
	if err != nil {
		return "", approval.ExplainAccess(err, "list CommandRuns in "+f.where, "list")
	}
	if first {
		runs = awaiting(runs)
		for _, r := range runs {
			f.shown[client.ObjectKeyFromObject(&r)] = r
		}
		if err := writeRunTable(f.out, runs, f.table, time.Now()); err != nil {
			return "", err
		}
		if len(runs) == 0 {
			_, _ = fmt.Fprintf(f.errOut, "No CommandRuns awaiting approval in %s yet; waiting for new ones.\n", f.where)
		}
		return rv, nil
	}
	present := map[client.ObjectKey]bool{}
	for i := range runs {
		present[client.ObjectKeyFromObject(&runs[i])] = true
		if err := f.see(&runs[i]); err != nil {
			return "", err
		}
	}
	for key, r := range f.shown {
		if !present[key] {
			if err := f.gone(&r); err != nil {
				return "", err
			}
		}
	}
	return rv, nil
}

// watchFrom follows the runs from resourceVersion rv and prints what changes,
// until the server no longer has the version to resume from: then it lists
// again and returns the new list's resourceVersion. The API server sends
// that refusal as an event of the watch (410 Gone), which the RetryWatcher
// passes on and does not retry.
func (f *follower) watchFrom(ctx context.Context, rv string) (string, error) {
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return f.c.Watch(ctx, &skillsv1.CommandRunList{}, append(slices.Clip(f.opts), &client.ListOptions{Raw: &opts})...)
		},
	})
	if err != nil {
		return rv, err
	}
	defer func() {
		w.Stop()
		<-w.Done()
	}()
	for {
		select {
		case <-ctx.Done():
			return rv, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				// It stops by itself only after an error it passed on;
				// should it stop otherwise, watch again.
				return rv, ctx.Err()
			}
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return f.list(ctx, false)
				}
				return rv, approval.ExplainAccess(err, "watch CommandRuns in "+f.where, "watch")
			}
			run, isRun := ev.Object.(*skillsv1.CommandRun)
			if !isRun {
				continue
			}
			rv = run.ResourceVersion
			switch ev.Type {
			case watch.Added, watch.Modified:
				err = f.see(run)
			case watch.Deleted:
				err = f.gone(run)
			}
			if err != nil {
				return rv, err
			}
		}
	}
}

// see prints a run that came to await approval, or that left it.
func (f *follower) see(r *skillsv1.CommandRun) error {
	key := client.ObjectKeyFromObject(r)
	_, shown := f.shown[key]
	waiting := r.Status.Phase == skillsv1.PhaseAwaitingApproval && r.DeletionTimestamp == nil
	switch {
	case waiting && !shown:
		f.shown[key] = *r
		return f.print(r)
	case waiting:
		f.shown[key] = *r
	case shown:
		delete(f.shown, key)
		return f.print(r)
	}
	return nil
}

// gone prints a run shown as awaiting approval that was deleted.
func (f *follower) gone(r *skillsv1.CommandRun) error {
	key := client.ObjectKeyFromObject(r)
	if _, shown := f.shown[key]; !shown {
		return nil
	}
	delete(f.shown, key)
	deleted := r.DeepCopy()
	if deleted.DeletionTimestamp == nil {
		deleted.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	return f.print(deleted)
}

// print prints one row, without the header.
func (f *follower) print(r *skillsv1.CommandRun) error {
	t := f.table
	t.noHeader = true
	return writeRunTable(f.out, []skillsv1.CommandRun{*r}, t, time.Now())
}
