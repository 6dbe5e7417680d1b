// Package doctor is the command `kubectl skills doctor`: it tells whether a
// cluster is fit for kubeskills, by reading it and asking the API server,
// and proves with canary pods that a sandbox's network fence holds and that
// its runner judges the programs a command starts.
//
// The root command of the plugin (package cli) adds it through NewCommand;
// it shares with the other commands only package cmdline.
package doctor

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
)

const doctorLong = `Tell whether a cluster is fit for kubeskills, by checking it, and prove
the sandbox's network fence with real pods.

One line is printed per check, 'ok   CHECK: WHAT WAS FOUND' or
'FAIL CHECK: WHAT IS WRONG. Fix: WHAT TO DO', then a summary. The checks:

  crds        the CustomResourceDefinitions skills, agents, commandpolicies
              and commandruns of kubeskills.io are installed and Established
  admission   the operator's ValidatingAdmissionPolicies are installed, each
              with a binding that names it and denies
  operator    the operator's Deployment (labelled
              app.kubernetes.io/component=manager and
              app.kubernetes.io/part-of=kubeskills) is Available
  agent-rbac  the ServiceAccount of each Agent of the namespace may file and
              follow CommandRuns, and nothing more: no Jobs, pods or exec, no
              approving or changing runs, policies or fences, no Secrets, no
              tokens and no impersonation (asked of the API server with
              SubjectAccessReviews; bindings that name it are listed)
  netpol      no NetworkPolicy of the namespace selects sandbox pods and
              allows them traffic beyond their fence (NetworkPolicies add
              up: any one that selects a pod opens it); an Agent's
              agent-NAME.warm, which lets only the operator's pods reach
              its warm sandboxes on TCP 8070, is the operator's own
  canary      sandbox pods fenced as a command's are, without an identity,
              reach neither the API server nor a Service nor a pod
  canary-identity
              a sandbox with an identity (that of --policy's
              spec.sandbox.serviceAccountName) reaches the API server, and
              neither a Service nor a pod
  canary-exec a sandbox judges every program its command starts: awk,
              allowed and approved, starts touch through system(), which
              the policy refuses; the runner must stop it before it runs
              (exit 126, a refusal naming it). Fails when touch ran, and
              when the runner cannot supervise programs there (ptrace
              forbidden), since then no sandbox runs anything

The canary runs real pods in the namespace: a target (a small HTTP server
and its Service), an unfenced control pod that must reach the target (else
nothing is proven), and client pods fenced by the NetworkPolicy the operator
builds for a sandbox, each created once its NetworkPolicy exists. They
probe with curl and report through their termination message; a fenced
pod probes only once it has seen its fence in force, as a sandbox's
runner waits for it (an address the fence denies stops answering), and
reports a fence never seen in force within 20s as a failure of its own.
The exec canary is a sandbox pod built as the operator builds one, its
runner copied from the operator's image (its --image). Every object the
canary makes is labelled kubeskills.io/doctor=canary and deleted at the
end, on Ctrl-C, and at the start of the next run. A cluster whose network
plugin ignores NetworkPolicy fails the canary. The image is --image, else
the --sandbox-image of the operator's Deployment; it needs sh, curl and
awk.

The namespace is that of -n, else of the kubeconfig's context. The doctor
needs to read CRDs, admission policies, Deployments, RBAC bindings and
NetworkPolicies, to create SubjectAccessReviews, and in the namespace to
create and delete pods, Services and NetworkPolicies: a cluster admin's
rights.

Exit status: 0 when every check passed, 1 otherwise.`

const doctorExample = `  # Check the cluster and prove the fence in the namespace agents
  kubectl skills doctor -n agents

  # Prove also the identity that the CommandPolicy ops-policy names
  kubectl skills doctor -n agents --policy ops-policy

  # On a control plane without nodes, where no pod can run
  kubectl skills doctor -n agents --skip-canary`

// defaultToolboxImage is the canary's image when neither --image nor the
// operator's Deployment names one.
const defaultToolboxImage = "docker.io/kubeskills/toolbox:dev"

// options are the flags of doctor.
type options struct {
	*cmdline.Options
	policy     string
	image      string
	timeout    time.Duration
	skipCanary bool
}

// NewCommand returns the command doctor, which the root command of the
// plugin adds to its own.
func NewCommand(o *cmdline.Options) *cobra.Command {
	opts := &options{Options: o}
	cmd := &cobra.Command{
		Use:     "doctor [--policy NAME] [--image IMAGE] [--timeout D] [--skip-canary]",
		Short:   "Check that the cluster is fit for kubeskills and prove the sandbox's fence",
		Long:    doctorLong,
		Example: doctorExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return opts.run(cmd.Context())
		},
	}
	flags := cmd.Flags()
	flags.StringVar(&opts.policy, "policy", "",
		"CommandPolicy of the namespace whose spec.sandbox.serviceAccountName the identity canary uses")
	flags.StringVar(&opts.image, "image", "",
		"Image of the canary pods (needs sh, curl and awk); default: the operator's --sandbox-image, else "+defaultToolboxImage)
	flags.DurationVar(&opts.timeout, "timeout", 2*time.Minute,
		"How long the canary waits for its pods to start and report")
	flags.BoolVar(&opts.skipCanary, "skip-canary", false,
		"Do not run the canary pods: only for control planes without nodes, where nothing proves the fence")
	return cmd
}

// run runs every check, prints the report and fails when a check failed.
func (o *options) run(ctx context.Context) error {
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, not %s", o.timeout)
	}
	c, err := o.Client()
	if err != nil {
		return err
	}
	ns, err := o.Namespace()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &doctor{c: c, ns: ns}
	results := []checkResult{d.checkCRDs(ctx), d.checkAdmission(ctx)}
	operator := d.checkOperator(ctx)
	netpol, openers := d.checkNetworkPolicies(ctx, operator.namespace)
	results = append(results, operator.result, d.checkAgentRBAC(ctx), netpol)
	if o.skipCanary {
		_, _ = fmt.Fprintln(o.Streams.ErrOut, "warning: --skip-canary: no pod proved the sandbox's network fence, nor that it judges the programs commands start")
	} else {
		image := o.image
		if image == "" {
			image = operator.sandboxImage
		}
		if image == "" {
			image = defaultToolboxImage
		}
		cn := &canary{c: c, ns: ns, image: image, runnerImage: operator.runnerImage, policy: o.policy, timeout: o.timeout,
			openers: openers, log: o.Streams.ErrOut}
		results = append(results, cn.run(ctx)...)
	}
	if writeReport(o.Streams.Out, results) > 0 {
		return cmdline.ErrProblems
	}
	return nil
}

// doctor runs the checks that only read the cluster.
type doctor struct {
	c  client.Client
	ns string
}
