package controller

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// HandoffKeySecret names the Secret, in the operator's namespace, that
// holds the key every warm sandbox's handoff secret is derived from
// (WarmPool.secret). It outlives the operator's pods, so an operator that
// restarted can still hand a command to a sandbox an earlier one started:
// a run handed over just before the restart is handed over again, which
// the sandbox answers with the same run's result, never a second run.
const HandoffKeySecret = "kubeskills-handoff-key"

// handoffKeyField is the Secret's key holding the key.
const handoffKeyField = "key"

// handoffKeyBytes is the size of a new key.
const handoffKeyBytes = 32

// WarmPool is what the operator knows of its warm sandboxes beyond the
// API: which run this process handed which pod, the handoffs under way and
// their outcomes, and the key their secrets come from. The CommandRun
// reconciler hands commands over through it; the warm pool reconciler
// keeps each agent's pods. It runs on the leader only, as they do.
type WarmPool struct {
	// Client creates the key's Secret; Live reads it.
	Client client.Client
	Live   client.Reader
	// Namespace is the operator's own, where the key's Secret is. Empty
	// (a manager outside a cluster) keeps a key in memory: sandboxes then
	// outlive the key when the operator restarts, and their runs fail
	// rather than run twice.
	Namespace string
	// Port is the runner's handoff port; runner.HandoffPort when zero.
	Port int
	// HTTP sends the handoffs; a client without a total timeout when nil.
	HTTP *http.Client

	mu     sync.Mutex
	ctx    context.Context
	key    []byte
	claims map[types.NamespacedName]types.UID
	// calls holds each run's handoffs, by run then pod, until the run ends
	// or is deleted: a refusal is remembered while a status that names the
	// pod may still be read, whatever the cache shows.
	calls map[types.NamespacedName]*runHandoffs

	// Wake receives the runs whose handoff ended; Refill the agents one
	// of whose warm pods was taken.
	Wake   chan event.GenericEvent
	Refill chan event.GenericEvent
}

// runHandoffs are the handoffs of the run with UID uid, by pod.
type runHandoffs struct {
	uid  types.UID
	pods map[types.NamespacedName]*handoffCall
}

// handoffCall is one handoff under way in this process, and its outcome.
type handoffCall struct {
	pod types.NamespacedName
	// fresh: the run's first handoff, made just after its status named
	// the pod, so that no earlier one can have been taken.
	fresh bool
	done  bool
	// at is when it ended.
	at  time.Time
	res *runner.Result
	err error
}

// NewWarmPool returns a pool whose key lives in namespace.
func NewWarmPool(c client.Client, live client.Reader, namespace string) *WarmPool {
	return &WarmPool{
		Client: c, Live: live, Namespace: namespace,
		claims: map[types.NamespacedName]types.UID{},
		calls:  map[types.NamespacedName]*runHandoffs{},
		Wake:   make(chan event.GenericEvent, 256),
		Refill: make(chan event.GenericEvent, 256),
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (w *WarmPool) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: handoffs live as long as ctx.
func (w *WarmPool) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
	<-ctx.Done()
	return nil
}

// secret returns the handoff secret of pod namespace/name: the HMAC-SHA256,
// under the key, of its namespaced name. Only its SHA-256 is in the pod.
func (w *WarmPool) secret(ctx context.Context, namespace, name string) (string, error) {
	key, err := w.loadKey(ctx)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(namespace + "/" + name))
	return hex.EncodeToString(mac.Sum(nil)), nil
}

// secretSHA256 is the hexadecimal SHA-256 of the handoff secret of a pod.
func (w *WarmPool) secretSHA256(ctx context.Context, namespace, name string) (string, error) {
	s, err := w.secret(ctx, namespace, name)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:]), nil
}

// loadKey reads the key from its Secret, making the Secret when there is
// none; once read, it is kept.
func (w *WarmPool) loadKey(ctx context.Context) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.key != nil {
		return w.key, nil
	}
	key := make([]byte, handoffKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("failed to make a handoff key: %w", err)
	}
	if w.Namespace == "" {
		w.key = key
		return key, nil
	}
	ref := types.NamespacedName{Namespace: w.Namespace, Name: HandoffKeySecret}
	for range 2 {
		s := &corev1.Secret{}
		err := w.Live.Get(ctx, ref, s)
		switch {
		case err == nil && len(s.Data[handoffKeyField]) >= handoffKeyBytes:
			w.key = s.Data[handoffKeyField]
			return w.key, nil
		case err == nil:
			return nil, fmt.Errorf("secret %s holds no handoff key of %d bytes in %q", ref, handoffKeyBytes, handoffKeyField)
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("failed to get secret %s, the warm sandboxes' handoff key: %w", ref, err)
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{handoffKeyField: key},
		}
		err = w.Client.Create(ctx, s)
		switch {
		case err == nil:
			w.key = key
			return key, nil
		case !apierrors.IsAlreadyExists(err):
			return nil, fmt.Errorf("failed to create secret %s, the warm sandboxes' handoff key: %w", ref, err)
		}
		// Another replica made it first: read it.
	}
	return nil, fmt.Errorf("secret %s, the warm sandboxes' handoff key, could not be read or made", ref)
}

// claim marks pod as taken by the run with UID uid in this process; false
// when another run took it.
func (w *WarmPool) claim(pod types.NamespacedName, uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if owner, ok := w.claims[pod]; ok && owner != uid {
		return false
	}
	w.claims[pod] = uid
	return true
}

// claimed tells whether a run of this process took pod.
func (w *WarmPool) claimed(pod types.NamespacedName) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.claims[pod]
	return ok
}

// release gives up the run's claim of pod: the run ended, or goes
// elsewhere. What its handoffs answered is kept until forget.
func (w *WarmPool) release(pod types.NamespacedName, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.claims[pod] == uid {
		delete(w.claims, pod)
	}
}

// forget drops the handoffs of the run named key: it ended, or was
// deleted.
func (w *WarmPool) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.calls, key)
}

// handoffsLocked returns run's handoffs by pod: none when those recorded
// under its name are of another run that had the name. w.mu is held.
func (w *WarmPool) handoffsLocked(run *skillsv1.CommandRun) map[types.NamespacedName]*handoffCall {
	if h := w.calls[client.ObjectKeyFromObject(run)]; h != nil && h.uid == run.UID {
		return h.pods
	}
	return nil
}

// outcome returns the handoff of run to pod in this process: nil when
// there is none, one not done yet while it is under way.
func (w *WarmPool) outcome(run *skillsv1.CommandRun, pod types.NamespacedName) *handoffCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.handoffsLocked(run)[pod]
	if !ok {
		return nil
	}
	copied := *c
	return &copied
}

// tried tells whether run was handed to pod in this process: a pod that
// refused it is not handed it again, even when the cache still shows the
// pod waiting.
func (w *WarmPool) tried(run *skillsv1.CommandRun, pod types.NamespacedName) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.handoffsLocked(run)[pod]
	return ok
}

// handOff starts handing h to pod, unless a handoff of the run is under
// way, and wakes the run when it ends. fresh says that it is the run's
// first. The secret is derived here, never stored.
func (w *WarmPool) handOff(ctx context.Context, run *skillsv1.CommandRun, pod *corev1.Pod, h runner.Handoff, fresh bool) error {
	secret, err := w.secret(ctx, pod.Namespace, pod.Name)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(pod)
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.handoffsLocked(run)[key]; ok && !c.done {
		return nil
	}
	if w.ctx == nil {
		return errors.New("the warm pool has not started")
	}
	runKey := client.ObjectKeyFromObject(run)
	if w.handoffsLocked(run) == nil {
		w.calls[runKey] = &runHandoffs{uid: run.UID, pods: map[types.NamespacedName]*handoffCall{}}
	}
	call := &handoffCall{pod: key, fresh: fresh}
	w.calls[runKey].pods[key] = call
	w.claims[key] = run.UID
	addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(w.port()))
	httpClient := w.HTTP
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	go func(ctx context.Context) {
		res, err := runner.HandOff(ctx, httpClient, addr, secret, h, nil)
		w.mu.Lock()
		call.done, call.at, call.res, call.err = true, time.Now(), res, err
		w.mu.Unlock()
		wake := &skillsv1.CommandRun{}
		wake.Namespace, wake.Name = runKey.Namespace, runKey.Name
		select {
		case w.Wake <- event.GenericEvent{Object: wake}:
		case <-ctx.Done():
		}
	}(w.ctx)
	return nil
}

// refill asks the warm pool reconciler to replace the agent's pod that a
// run took.
func (w *WarmPool) refill(namespace, agent string) {
	a := &skillsv1.Agent{}
	a.Namespace, a.Name = namespace, agent
	select {
	case w.Refill <- event.GenericEvent{Object: a}:
	default:
		// The channel is full: the agent's pods' own events refill it.
		ctrl.Log.WithName("warm-pool").V(1).Info("Refill request dropped", "agent", agent)
	}
}

// operatorNamespace is the namespace of the operator's pods, which the
// warm sandboxes let in: its own, or kubeskills-system, where the
// operator is installed, when it runs outside the cluster.
func (w *WarmPool) operatorNamespace() string {
	if w.Namespace != "" {
		return w.Namespace
	}
	return "kubeskills-system"
}

func (w *WarmPool) port() int {
	if w.Port != 0 {
		return w.Port
	}
	return runner.HandoffPort
}

// warmPodUsable tells whether a warm pod waits for a command now: running,
// its runner ready (the startup probe found it so), with an address, not
// being deleted, and not about to reach its idle timeout.
func warmPodUsable(pod *corev1.Pod, idle time.Duration, now time.Time) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || !pod.DeletionTimestamp.IsZero() {
		return false
	}
	started := false
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Started != nil && *cs.Started && cs.State.Running != nil {
			started = true
			if now.Sub(cs.State.Running.StartedAt.Time) > idle-min(warmExpiryMargin, idle/10) {
				return false
			}
		}
	}
	return started
}

// warmExpiryMargin: a warm pod this close to its idle timeout (or a tenth
// of it, when shorter) is not handed a command, which its runner could
// refuse as it stops waiting.
const warmExpiryMargin = 30 * time.Second
