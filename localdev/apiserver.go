package localdev

import (
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
)

// reactor is what client-go's fake clientsets (typed and dynamic) let a test hook into.
type reactor interface {
	Tracker() clienttesting.ObjectTracker
	PrependReactor(verb, resource string, reaction clienttesting.ReactionFunc)
}

// apiServerRules makes a fake clientset keep the API server's rules that Dovetail's termination
// path relies on, which the fakes skip: creation sets metadata.creationTimestamp and uid; deleting
// an object that has finalizers only sets metadata.deletionTimestamp; and the update or patch
// that removes the last finalizer of an object being deleted deletes it. Without them the
// in-memory cluster would be kinder than a real one (a NodeClaim would vanish on delete and its
// instance would never be terminated by the lifecycle function).
func apiServerRules(c reactor, now func() time.Time) {
	var uids atomic.Int64
	tracker := c.Tracker()
	c.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(clienttesting.CreateAction)
		if !ok {
			return false, nil, nil
		}
		if m, err := meta.Accessor(ca.GetObject()); err == nil {
			if ts := m.GetCreationTimestamp(); ts.IsZero() {
				m.SetCreationTimestamp(metav1.NewTime(now()))
			}
			if m.GetUID() == "" {
				m.SetUID(types.UID(fmt.Sprintf("in-memory-%d", uids.Add(1))))
			}
		}
		return false, nil, nil // the default reactor stores it
	})
	c.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		da, ok := a.(clienttesting.DeleteAction)
		if !ok {
			return false, nil, nil
		}
		obj, err := tracker.Get(da.GetResource(), da.GetNamespace(), da.GetName())
		if err != nil {
			return false, nil, nil
		}
		m, err := meta.Accessor(obj)
		if err != nil || len(m.GetFinalizers()) == 0 {
			return false, nil, nil
		}
		if m.GetDeletionTimestamp() == nil {
			t := metav1.NewTime(now())
			m.SetDeletionTimestamp(&t)
			if err := tracker.Update(da.GetResource(), obj, da.GetNamespace()); err != nil {
				return true, nil, err
			}
		}
		return true, obj, nil
	})
	finalize := func(a clienttesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := clienttesting.ObjectReaction(tracker)(a)
		if !handled || err != nil || obj == nil {
			return handled, obj, err
		}
		if m, merr := meta.Accessor(obj); merr == nil && m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
			if derr := tracker.Delete(a.GetResource(), a.GetNamespace(), m.GetName()); derr != nil {
				return true, nil, derr
			}
		}
		return handled, obj, err
	}
	c.PrependReactor("update", "*", finalize)
	c.PrependReactor("patch", "*", finalize)
}
