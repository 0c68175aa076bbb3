package scenarios

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	"github.com/dovetail-dev/dovetail/shared/kube"
)

// fakeClient is what client-go's fake clientset and fake dynamic client both offer: their object
// tracker and the reactor chains.
type fakeClient interface {
	Tracker() clienttesting.ObjectTracker
	PrependReactor(verb, resource string, reaction clienttesting.ReactionFunc)
	PrependWatchReactor(resource string, reaction clienttesting.WatchReactionFunc)
}

// watchCounter tells when the agent's informers have caught up with the in-memory API server, so
// a scenario on a fake clock is deterministic: the agent builds its snapshot, and checks a
// command's staleness, from caches that hold every write made so far, as they would a moment
// later in a real cluster.
//
// It gives every watch an informer opens a twin: a second watch of the same resource, namespace
// and options on the same tracker. The tracker sends each change to both at once, under its
// lock, so the events waiting in the twins (read by no one else) count what the informers were
// sent. The agent's watcher bumps its revision once per informer event it handled
// (kube.Revisions), so the informers have caught up exactly when the bumps since the start
// (Revisions.Bumps, which the leader's revision reservation does not reset) equal the events
// sent. The cluster must be empty when the informers start (every object
// then arrives as a watch event) and be written by one goroutine at a time (the scenario's).
type watchCounter struct {
	mu    sync.Mutex
	twins []watch.Interface
	// selects[i] is twins[i]'s field selector (nil: none), which the fake tracker ignores.
	selects []fields.Selector
	sent    int // events read from the twins so far
	// listed and watched are the resources (and namespaces) listed while the informers started
	// and those a watch was opened on. A resource may be listed more than once before its
	// watch (the Watcher's probe whether an optional CRD is served, then its informer's list).
	listed, watched map[string]bool
	started         bool
}

// install puts the counter's reactors in front of c's chains. The watch reactor does what the
// fakes' own does (kubernetes/fake and dynamic/fake, client-go v0.37: tracker.Watch with the
// action's list options) and opens the twin.
func (w *watchCounter) install(c fakeClient) {
	tracker := c.Tracker()
	key := func(a clienttesting.Action) string { return a.GetResource().String() + " " + a.GetNamespace() }
	c.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		w.mu.Lock()
		if !w.started {
			if w.listed == nil {
				w.listed = map[string]bool{}
			}
			w.listed[key(a)] = true
		}
		w.mu.Unlock()
		return false, nil, nil // the fake's own reactor answers
	})
	c.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		gvr, ns := a.GetResource(), a.GetNamespace()
		informer, err := tracker.Watch(gvr, ns, opts)
		if err != nil {
			return false, nil, err
		}
		var sel fields.Selector
		if opts.FieldSelector != "" {
			if sel, err = fields.ParseSelector(opts.FieldSelector); err != nil {
				informer.Stop()
				return false, nil, err
			}
		}
		twin, err := tracker.Watch(gvr, ns, opts)
		if err != nil {
			informer.Stop()
			return false, nil, err
		}
		if sel != nil {
			// The informer is sent what the API server would send it.
			informer = watch.Filter(informer, func(e watch.Event) (watch.Event, bool) { return e, selected(sel, e.Object) })
		}
		w.mu.Lock()
		w.twins = append(w.twins, twin)
		w.selects = append(w.selects, sel)
		if w.watched == nil {
			w.watched = map[string]bool{}
		}
		w.watched[key(a)] = true
		w.mu.Unlock()
		return true, informer, nil
	})
}

// watching waits (up to timeout) until every resource an informer listed has its watch open:
// each informer lists, then watches. Called once, after the informers synced (their lists are
// done).
func (w *watchCounter) watching(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		lists, watches := len(w.listed), 0
		for k := range w.listed {
			if w.watched[k] {
				watches++
			}
		}
		if lists == watches {
			w.started = true
		}
		w.mu.Unlock()
		if lists == watches {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent's informers listed %d resources but watch %d after %s", lists, watches, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// drain reads what waits in the twins and returns how many events were sent in all. A twin holds
// at most watch.DefaultChanSize (100) events; the tracker panics past that, so the World drains
// after every write it makes.
func (w *watchCounter) drain() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, t := range w.twins {
		for more := true; more; {
			select {
			case ev, ok := <-t.ResultChan():
				switch {
				case !ok:
					more = false
				case selected(w.selects[i], ev.Object):
					w.sent++
				}
			default:
				more = false
			}
		}
	}
	return w.sent
}

// selected reports whether obj passes sel as the API server applies a watch's field selector.
// The tracker of client-go's fakes sends every object of the resource whatever the selector;
// the API server sends an informer with one (the Watcher's ConfigMaps, by metadata.name) only
// the objects it matches, so both the informer's watch and its twin are filtered here. Every
// resource supports metadata.name and metadata.namespace (the API conventions' "field
// selectors").
func selected(sel fields.Selector, obj runtime.Object) bool {
	if sel == nil {
		return true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return true
	}
	return sel.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()})
}

// errUnsettled is wrapped when the informers did not catch up in time.
var errUnsettled = errors.New("the agent's informers did not catch up with the in-memory cluster")

// settle waits until the watcher has handled every event sent to its informers (at most
// timeout). An event handled that was never sent means the counting is wrong, and is an error.
func (w *watchCounter) settle(ctx context.Context, revs *kube.Revisions, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		sent := w.drain()
		handled := int(revs.Bumps())
		switch {
		case handled == sent:
			return nil
		case handled > sent:
			return fmt.Errorf("%w: %d events handled, only %d sent", errUnsettled, handled, sent)
		case time.Now().After(deadline):
			return fmt.Errorf("%w: %d of %d events handled after %s", errUnsettled, handled, sent, timeout)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		time.Sleep(50 * time.Microsecond)
	}
}
