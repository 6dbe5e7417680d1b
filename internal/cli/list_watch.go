package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
)

// minWatchLife is how long a watch must have lasted for the next one to
// start at once; a watch the server ends sooner is started again after it.
const minWatchLife = time.Second

// follower prints the runs awaiting approval, then follows the cluster:
// a row for each run that comes to await approval, and one for each that
// leaves it (with its new phase, or Deleted).
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
	f.shown = map[client.ObjectKey]skillsv1.CommandRun{}
	rv, err := f.list(ctx, true)
	for err == nil {
		rv, err = f.follow(ctx, rv)
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
	var list skillsv1.CommandRunList
	if err := f.c.List(ctx, &list, f.opts...); err != nil {
		return "", explainAccess(err, "list CommandRuns in "+f.where, "list")
	}
	if first {
		runs := awaiting(list.Items)
		for _, r := range runs {
			f.shown[client.ObjectKeyFromObject(&r)] = r
		}
		if err := writeRunTable(f.out, runs, f.table, time.Now()); err != nil {
			return "", err
		}
		if len(runs) == 0 {
			_, _ = fmt.Fprintf(f.errOut, "No CommandRuns awaiting approval in %s yet; waiting for new ones.\n", f.where)
		}
		return list.ResourceVersion, nil
	}
	present := map[client.ObjectKey]bool{}
	for i := range list.Items {
		present[client.ObjectKeyFromObject(&list.Items[i])] = true
		if err := f.see(&list.Items[i]); err != nil {
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
	return list.ResourceVersion, nil
}

// follow watches from resourceVersion rv until the watch ends, and returns
// where to resume: the last resourceVersion seen, or a new list's when the
// server no longer has rv.
func (f *follower) follow(ctx context.Context, rv string) (string, error) {
	started := time.Now()
	w, err := f.c.Watch(ctx, &skillsv1.CommandRunList{}, append(f.opts[:len(f.opts):len(f.opts)],
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})...)
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return f.list(ctx, false)
		}
		return rv, explainAccess(err, "watch CommandRuns in "+f.where, "watch")
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, pause(ctx, started)
			}
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return f.list(ctx, false)
				}
				return rv, fmt.Errorf("failed to watch CommandRuns in %s: %s", f.where, cmdline.OneLine(err.Error()))
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

// pause waits a moment before a watch that the server ended quickly is
// started again, so that a server that ends every watch is not flooded.
func pause(ctx context.Context, started time.Time) error {
	left := minWatchLife - time.Since(started)
	if left <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(left):
		return nil
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
