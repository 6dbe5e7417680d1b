package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/tools/pager"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/approval"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
)

const listLong = `List the CommandRuns of a namespace: the commands agents asked to run, what
the policy decided, and how they ended.

Columns: NAME, AGENT, COMMAND (its start), PHASE (Pending, AwaitingApproval,
Running, Succeeded, Failed, Denied, Expired or TimedOut), ACTION (the
policy's decision: Always, Ask or Never), EXIT (the command's exit code once
it ran) and AGE. Runs are listed oldest first.

With --pending, only the runs awaiting approval are listed, the most urgent
first, with who asked (REQUESTED BY) and the DEADLINE after which a run
expires unless someone approves or denies it; decide with
'kubectl skills approve RUN' or 'kubectl skills deny RUN'. COMMAND shows only
the start of a command, with characters that could drive a terminal
replaced: read the whole command, and why the policy asks, before deciding:

  kubectl get commandrun RUN -o jsonpath='{.spec.command}{"\n"}{.status.decision.reason}{"\n"}'

With --pending --watch (-w), it prints the runs awaiting approval, then
follows the cluster until interrupted: a new run awaiting approval gets a
row, and so does one that leaves it, with its new PHASE (Running, Denied,
Expired..., or Deleted). It resumes by itself when the API server ends the
watch. Watching needs 'watch' on commandruns, which the same ClusterRole
grants.

The namespace is that of -n, else of the kubeconfig's context; -A lists every
namespace and adds a NAMESPACE column. Listing needs 'list' on commandruns,
which the kubeskills-approver ClusterRole grants.`

const listExample = `  # Every run of the namespace agents
  kubectl skills list -n agents

  # What waits for a person, in every namespace
  kubectl skills list --pending -A

  # Follow what comes to wait for a person, until Ctrl-C
  kubectl skills list --pending --watch -n agents`

// listPageSize is how many CommandRuns one list request asks for, as
// kubectl get's --chunk-size.
const listPageSize = 500

// commandColumnRunes is how much of a command the COMMAND column shows.
const commandColumnRunes = 48

// listOptions are the flags of list.
type listOptions struct {
	*cmdline.Options
	pending       bool
	watch         bool
	allNamespaces bool
}

func newListCommand(o *cmdline.Options) *cobra.Command {
	opts := &listOptions{Options: o}
	cmd := &cobra.Command{
		Use:     "list [--pending [--watch]] [-A]",
		Short:   "List CommandRuns: what agents asked to run and what became of it",
		Long:    listLong,
		Example: listExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return opts.run(cmd.Context())
		},
	}
	flags := cmd.Flags()
	flags.BoolVar(&opts.pending, "pending", false, "List only the runs awaiting approval, with their deadline")
	flags.BoolVarP(&opts.watch, "watch", "w", false,
		"With --pending: then follow new runs awaiting approval, and those that leave it, until interrupted")
	flags.BoolVarP(&opts.allNamespaces, "all-namespaces", "A", false, "List the runs of every namespace")
	return cmd
}

// run lists the runs and prints the table.
func (o *listOptions) run(ctx context.Context) error {
	if o.watch && !o.pending {
		return errors.New("--watch follows the runs awaiting approval: use it with --pending")
	}
	c, err := o.WatchClient()
	if err != nil {
		return err
	}
	var opts []client.ListOption
	where := "every namespace"
	if !o.allNamespaces {
		ns, err := o.Namespace()
		if err != nil {
			return err
		}
		opts = append(opts, client.InNamespace(ns))
		where = fmt.Sprintf("namespace %q", ns)
	}
	if o.watch {
		f := &follower{c: c, opts: opts, where: where, out: o.Streams.Out, errOut: o.Streams.ErrOut,
			table: runTable{pending: true, watch: true, namespaces: o.allNamespaces}}
		return f.run(ctx)
	}
	runs, _, err := listRuns(ctx, c, opts)
	if err != nil {
		return approval.ExplainAccess(err, "list CommandRuns in "+where, "list")
	}
	if o.pending {
		runs = awaiting(runs)
	}
	if len(runs) == 0 {
		what := "No CommandRuns"
		if o.pending {
			what = "No CommandRuns awaiting approval"
		}
		_, _ = fmt.Fprintf(o.Streams.ErrOut, "%s in %s.\n", what, where)
		return nil
	}
	return writeRunTable(o.Streams.Out, runs, runTable{pending: o.pending, namespaces: o.allNamespaces}, time.Now())
}

// listRuns lists the CommandRuns that opts select, listPageSize at a time
// (the API server may return fewer), and returns them with the
// resourceVersion the list was read at. Should a page's continue token
// expire, the pager lists everything again in one request.
func listRuns(ctx context.Context, c client.Reader, opts []client.ListOption) ([]skillsv1.CommandRun, string, error) {
	p := pager.New(func(ctx context.Context, page metav1.ListOptions) (runtime.Object, error) {
		var list skillsv1.CommandRunList
		err := c.List(ctx, &list, append(slices.Clip(opts), client.Limit(page.Limit), client.Continue(page.Continue))...)
		return &list, err
	})
	p.PageSize = listPageSize
	obj, _, err := p.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	list, err := meta.ListAccessor(obj)
	if err != nil {
		return nil, "", err
	}
	var runs []skillsv1.CommandRun
	err = meta.EachListItem(obj, func(item runtime.Object) error {
		run, ok := item.(*skillsv1.CommandRun)
		if !ok {
			return fmt.Errorf("listed a %T, not a CommandRun", item)
		}
		runs = append(runs, *run)
		return nil
	})
	return runs, list.GetResourceVersion(), err
}

// awaiting keeps the runs awaiting approval.
func awaiting(runs []skillsv1.CommandRun) []skillsv1.CommandRun {
	var out []skillsv1.CommandRun
	for _, r := range runs {
		if r.Status.Phase == skillsv1.PhaseAwaitingApproval {
			out = append(out, r)
		}
	}
	return out
}

// runTable says which table writeRunTable prints.
type runTable struct {
	// pending prints the approval table: REQUESTED BY and DEADLINE instead
	// of PHASE, ACTION and EXIT, the nearest deadline first.
	pending bool
	// namespaces adds a NAMESPACE column.
	namespaces bool
	// watch adds a PHASE column, last, to the approval table.
	watch bool
	// noHeader leaves the header out.
	noHeader bool
}

// writeRunTable prints runs as a table, as of now. It sorts runs in place.
func writeRunTable(w io.Writer, runs []skillsv1.CommandRun, t runTable, now time.Time) error {
	sortRuns(runs, t.pending)
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := []string{"NAME", "AGENT", "COMMAND", "PHASE", "ACTION", "EXIT", "AGE"}
	if t.pending {
		header = []string{"NAME", "AGENT", "COMMAND", "REQUESTED BY", "DEADLINE", "AGE"}
	}
	if t.pending && t.watch {
		header = append(header, "PHASE")
	}
	if t.namespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if !t.noHeader {
		_, _ = fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for i := range runs {
		row := runRow(&runs[i], t.pending, now)
		if t.pending && t.watch {
			row = append(row, phaseCell(&runs[i]))
		}
		if t.namespaces {
			row = append([]string{runs[i].Namespace}, row...)
		}
		_, _ = fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("failed to write table: %w", err)
	}
	return nil
}

// sortRuns orders runs by namespace, then oldest first, or for pending
// runs the nearest deadline first.
func sortRuns(runs []skillsv1.CommandRun, pending bool) {
	sort.SliceStable(runs, func(i, j int) bool {
		a, b := &runs[i], &runs[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if pending {
			da, db := deadlineOf(a), deadlineOf(b)
			if !da.Equal(db) {
				return da.Before(db)
			}
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// deadlineOf is a run's approval deadline; runs without one sort last.
func deadlineOf(r *skillsv1.CommandRun) time.Time {
	if r.Status.ApprovalDeadline == nil {
		return time.Unix(1<<40, 0)
	}
	return r.Status.ApprovalDeadline.Time
}

// runRow is one row of the table, without the namespace.
func runRow(r *skillsv1.CommandRun, pending bool, now time.Time) []string {
	command := r.Status.ShortCommand
	if command == "" {
		command = r.Spec.Command
	}
	row := []string{r.Name, cmdline.Printable(r.Spec.Agent), cmdline.Cell(command, commandColumnRunes)}
	if pending {
		row = append(row, cmdline.Cell(r.Spec.RequestedBy, 64), deadlineCell(r, now))
	} else {
		row = append(row, cmdline.NoneIfEmpty(string(r.Status.Phase)), actionCell(r), exitCell(r))
	}
	return append(row, ageCell(r, now))
}

// phaseCell is a run's phase, or Deleted once it is gone.
func phaseCell(r *skillsv1.CommandRun) string {
	if r.DeletionTimestamp != nil {
		return "Deleted"
	}
	return cmdline.NoneIfEmpty(string(r.Status.Phase))
}

func actionCell(r *skillsv1.CommandRun) string {
	if r.Status.Decision == nil {
		return "<none>"
	}
	return string(r.Status.Decision.Action)
}

func exitCell(r *skillsv1.CommandRun) string {
	if r.Status.Result == nil || r.Status.Result.ExitCode == nil {
		return "<none>"
	}
	return fmt.Sprint(*r.Status.Result.ExitCode)
}

func ageCell(r *skillsv1.CommandRun, now time.Time) string {
	if r.CreationTimestamp.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(r.CreationTimestamp.Time))
}

// deadlineCell shows the approval deadline in UTC and the time left.
func deadlineCell(r *skillsv1.CommandRun, now time.Time) string {
	if r.Status.ApprovalDeadline == nil {
		return "<none>"
	}
	at := r.Status.ApprovalDeadline.Time
	left := at.Sub(now)
	when := "passed"
	if left > 0 {
		when = "in " + duration.HumanDuration(left)
	}
	return fmt.Sprintf("%s (%s)", at.UTC().Format(time.RFC3339), when)
}
