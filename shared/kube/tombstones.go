package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// NodeClaim tombstones: a CreateNodeClaim replayed after its NodeClaim was deleted (a queue's
// redelivery, a dead-letter redrive, a re-published message) must create nothing, or a NodeClaim
// for a terminated instance stands as phantom capacity until the registration TTL reaps it.
// NodeClaim names derive from the decision (shared/launch NodeClaimName), so the name is the
// replay's identity.
//
// Where they live: every NodeClaim the agent creates carries the termination finalizer, so its
// deletion ends with the agent's own RemoveFinalizer; the agent writes the tombstone (name →
// "<RFC 3339 time> <providerID>") into the ConfigMap NodeClaimTombstonesConfigMap just before it
// releases the finalizer. The provider ID keeps a Node whose NodeClaim went first Dovetail's
// until its own finalizer is released (releasedClaimOf).
// The ConfigMap outlives agent restarts. Entries older than TombstoneTTL, and the oldest beyond
// MaxNodeClaimTombstones, are pruned; the latest pruned time is kept as a watermark under
// tombstoneWatermarkKey, and a CreateNodeClaim decided before the watermark is refused as too old
// to check. That is sound: a replayed name was deleted after the decision that named it, so a
// forgotten tombstone of it has a time after that decision and at or before the watermark. In
// memory, the watcher's NodeClaim delete events (Revisions.Deleted) cover a finalizer released by
// someone else while the agent runs.

// NodeClaimTombstonesConfigMap is the ConfigMap, in the agent's namespace, of deleted NodeClaims.
const NodeClaimTombstonesConfigMap = "dovetail-nodeclaim-tombstones"

// TombstoneTTL is how long a tombstone is kept: 24 hours, the command queues' retention (SQS
// message_retention_seconds 86400 in infra/aws/terraform/queues.tf; the Event Grid commands
// topic's one day). Older replays (a dead-letter queue redriven days later) meet the watermark.
const TombstoneTTL = 24 * time.Hour

// MaxNodeClaimTombstones bounds the ConfigMap: 4,000 entries of at most 253 + 21 bytes stay well
// under a ConfigMap's 1 MiB (Kubernetes docs, "ConfigMaps": data cannot exceed 1 MiB).
const MaxNodeClaimTombstones = 4000

// tombstoneWatermarkKey holds the latest time pruned; it starts with '.', which no NodeClaim name
// (an RFC 1123 subdomain) does, and is a valid ConfigMap key ([-._a-zA-Z0-9]+).
const tombstoneWatermarkKey = ".forgotten-before"

// tombstoneValue is a tombstone's ConfigMap value: "<RFC 3339 time> <providerID>".
func tombstoneValue(at time.Time, providerID string) string {
	return at.UTC().Format(time.RFC3339) + " " + providerID
}

// parseTombstone reads a tombstone's value; an unreadable time is the zero time.
func parseTombstone(v string) (time.Time, string) {
	at, providerID, _ := strings.Cut(v, " ")
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return time.Time{}, providerID
	}
	return t, providerID
}

// recordTombstone writes the tombstone of NodeClaim name (its instance providerID) at time at,
// pruning expired and surplus entries.
func (a *Applier) recordTombstone(ctx context.Context, name, providerID string, at time.Time) error {
	cms := a.kube.CoreV1().ConfigMaps(a.opts.Namespace)
	return retry.OnError(retry.DefaultRetry, func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }, func() error {
		cm, err := cms.Get(ctx, NodeClaimTombstonesConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: NodeClaimTombstonesConfigMap, Namespace: a.opts.Namespace},
				Data: map[string]string{name: tombstoneValue(at, providerID)}}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: a.opts.Component})
			return err
		}
		if err != nil {
			return err
		}
		data := pruneTombstones(cm.Data, name, tombstoneValue(at, providerID), a.opts.Clock.Now())
		if data == nil {
			return nil
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": cm.ResourceVersion}, "data": data})
		if err != nil {
			return err
		}
		_, err = cms.Patch(ctx, NodeClaimTombstonesConfigMap, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: a.opts.Component})
		return err
	})
}

// pruneTombstones returns the merge patch of data (null deletes a key, RFC 7386) that adds name
// with value (tombstoneValue) and drops entries older than TombstoneTTL and the oldest beyond
// MaxNodeClaimTombstones, raising the watermark to the latest time dropped; nil when name is
// recorded already.
func pruneTombstones(data map[string]string, name, value string, now time.Time) map[string]any {
	if _, ok := data[name]; ok {
		return nil
	}
	type entry struct {
		key string
		at  time.Time
	}
	at, _ := parseTombstone(value)
	entries := []entry{{name, at}}
	for k, v := range data {
		if k == tombstoneWatermarkKey {
			continue
		}
		t, _ := parseTombstone(v) // unreadable: the zero time, pruned first, raising the watermark to nothing
		entries = append(entries, entry{k, t})
	}
	sort.Slice(entries, func(i, j int) bool {
		if !entries[i].at.Equal(entries[j].at) {
			return entries[i].at.After(entries[j].at)
		}
		return entries[i].key < entries[j].key
	})
	patch := map[string]any{name: value}
	watermark, _ := time.Parse(time.RFC3339, data[tombstoneWatermarkKey])
	raised := false
	for i, e := range entries {
		if i < MaxNodeClaimTombstones && now.Sub(e.at) <= TombstoneTTL {
			continue
		}
		patch[e.key] = nil
		if e.at.After(watermark) {
			watermark, raised = e.at, true
		}
	}
	if raised {
		patch[tombstoneWatermarkKey] = watermark.UTC().Format(time.RFC3339)
	}
	return patch
}

// tombstoneReason returns why a CreateNodeClaim of name decided at decided is a replay (it was
// created and deleted since, or it is older than the tombstones remember), or "".
func (a *Applier) tombstoneReason(ctx context.Context, name string, decided time.Time) (string, error) {
	if a.state.Revisions().Deleted(KindNodeClaim, name) {
		return fmt.Sprintf("NodeClaim %s was created and deleted since (a replayed CreateNodeClaim)", name), nil
	}
	cm, err := a.kube.CoreV1().ConfigMaps(a.opts.Namespace).Get(ctx, NodeClaimTombstonesConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read NodeClaim tombstones: %w", err)
	}
	if v, ok := cm.Data[name]; ok {
		at, _ := parseTombstone(v)
		return fmt.Sprintf("NodeClaim %s was deleted at %s (a replayed CreateNodeClaim)", name, at.Format(time.RFC3339)), nil
	}
	if w, err := time.Parse(time.RFC3339, cm.Data[tombstoneWatermarkKey]); err == nil && decided.Before(w) {
		return fmt.Sprintf("decided at %s, before %s, the oldest deletion the tombstones still remember (%s): too old to tell from a replay",
			decided.UTC().Format(time.RFC3339), w.Format(time.RFC3339), TombstoneTTL), nil
	}
	return "", nil
}

// releasedClaimOf returns the name of a NodeClaim the agent released whose instance is
// providerID, or "" (none remembered).
func (a *Applier) releasedClaimOf(ctx context.Context, providerID string) (string, error) {
	cm, err := a.kube.CoreV1().ConfigMaps(a.opts.Namespace).Get(ctx, NodeClaimTombstonesConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read NodeClaim tombstones: %w", err)
	}
	for _, k := range sortedKeys(cm.Data) {
		if _, pid := parseTombstone(cm.Data[k]); k != tombstoneWatermarkKey && pid == providerID {
			return k, nil
		}
	}
	return "", nil
}
