package kube

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// --- SetProvisioningRequestStatus ---

// setProvisioningRequestStatus writes the command's conditions onto the ProvisioningRequest
// (the others it has are kept; a condition whose status did not change keeps its
// lastTransitionTime, the start of a booking window), as Cluster Autoscaler updates
// status.conditions. Only Cluster Autoscaler's condition types: the agent writes nothing else of
// an object a person or Kueue owns. A request gone, or re-created under the name (another UID),
// is left alone.
func (a *Applier) setProvisioningRequestStatus(ctx context.Context, cmd *events.Command) error {
	want := cmd.ProvisioningRequest
	if want == nil || want.Name == "" || want.Namespace == "" || want.UID == "" {
		return fmt.Errorf("%w: command.provisioningRequest.metadata: namespace, name and uid must not be empty", ErrInvalidCommand)
	}
	for i, c := range want.Status.Conditions {
		if !apisv1.IsProvisioningRequestCondition(c.Type) {
			return fmt.Errorf("%w: command.provisioningRequest.status.conditions[%d].type: %q: not a ProvisioningRequest condition",
				ErrInvalidCommand, i, c.Type)
		}
	}
	res := a.dyn.Resource(ProvisioningRequestGVR).Namespace(want.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := res.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get ProvisioningRequest %s/%s: %w", want.Namespace, want.Name, err)
		}
		got := &apisv1.ProvisioningRequest{}
		if err := FromUnstructured(u, got); err != nil {
			return fmt.Errorf("ProvisioningRequest %s/%s in cluster: %w", want.Namespace, want.Name, err)
		}
		if got.UID != want.UID {
			a.opts.Logger.Info("SetProvisioningRequestStatus: ProvisioningRequest re-created since the decision, left for the next one",
				"command", cmd.ID, "provisioningRequest", want.Namespace+"/"+want.Name)
			return nil
		}
		conds, changed := mergeConditions(got.Status.Conditions, want.Status.Conditions, got.Generation, a.opts.Clock.Now())
		if !changed {
			return nil
		}
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": u.GetResourceVersion()},
			"status":   map[string]any{"conditions": conds},
		})
		if err != nil {
			return err
		}
		_, err = res.Patch(ctx, want.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: a.opts.Component}, "status")
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}
