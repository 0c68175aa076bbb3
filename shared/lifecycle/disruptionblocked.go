package lifecycle

import (
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

// ConditionDisruptionBlocked is Dovetail's NodeClaim condition naming what keeps its node from
// being consolidated: True while disruption.Standing.Blockers finds any, reason the first
// blocker's kind (disruption.BlockerKind), message every blocker on its own line as
// "<kind> <object>: <message>"; removed when none is left. Karpenter has no such condition: it
// says the same only in DisruptionBlocked Events and logs. Its NodeClaim CRD accepts the type
// (status.conditions[].type is any CamelCase name) and computes Ready from Launched,
// Registered and Initialized alone (pkg/apis/v1 nodeclaim_status.go StatusConditions), so the
// condition changes nothing Karpenter reads.
const ConditionDisruptionBlocked = "DisruptionBlocked"

// MaxConditionMessageBytes is the longest condition message the API server accepts: 32768
// (metav1.Condition's message, maxLength in every CRD's schema, infra/crds).
const MaxConditionMessageBytes = 32768

// disruptionBlocked keeps the NodeClaim's DisruptionBlocked condition: the standing reasons its
// node is not a consolidation candidate, as shared/disruption's Candidates rules give them
// (disruption.Standing). The lifecycle function has no catalog for the price rule and runs no
// simulation, and the reasons that change by themselves (the consolidateAfter countdown, the
// node being disrupted or not initialized yet) are left out, so the condition is written only
// when an object changes what blocks, never on every snapshot. A NodeClaim of a NodePool not in
// the snapshot is left alone, as consolidatable leaves it.
func (d *decider) disruptionBlocked(nc *apisv1.NodeClaim, node *corev1.Node) {
	if d.pool(nc.Labels[apisv1.LabelNodePool]) == nil {
		return
	}
	bs := d.standingState().Blockers(node.Name)
	old := condition(nc, ConditionDisruptionBlocked)
	if len(bs) == 0 {
		if old != nil {
			d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, "status", nc.Name, string(nc.UID), "disruption-unblocked", fmt.Sprint(d.snap.Revision)),
				Kind: events.CommandSetNodeClaimStatus, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}},
				ClearConditions: []string{ConditionDisruptionBlocked}, Reason: "nothing blocks consolidating node " + node.Name})
		}
		return
	}
	reason, msg := string(bs[0].Kind), BlockersMessage(bs)
	if old != nil && old.Status == metav1.ConditionTrue && old.Reason == reason && old.Message == msg {
		return
	}
	d.setStatus(nc, "disruption-blocked-"+fmt.Sprint(d.snap.Revision), "", []metav1.Condition{
		d.cond(nc, ConditionDisruptionBlocked, metav1.ConditionTrue, reason, msg)})
}

// BlockersMessage is the DisruptionBlocked condition's message: one line per blocker,
// "<kind> <object>: <message>" (e.g. "DoNotDisrupt Pod/default/web-0: pod default/web-0 is
// annotated karpenter.sh/do-not-disrupt"), at most MaxConditionMessageBytes. Lines that do not
// fit are replaced by a last line counting them ("(3 more not shown)"); a first line too long
// on its own is cut at a rune boundary.
func BlockersMessage(bs []disruption.Blocker) string {
	var b strings.Builder
	for i, x := range bs {
		line := fmt.Sprintf("%s %s: %s", x.Kind, x.Object, x.Message)
		if i > 0 {
			line = "\n" + line
		}
		more := ""
		if left := len(bs) - i - 1; left > 0 {
			more = fmt.Sprintf("\n(%d more not shown)", left) // room for the count should a later line not fit
		}
		if b.Len()+len(line)+len(more) <= MaxConditionMessageBytes {
			b.WriteString(line)
			continue
		}
		if i == 0 {
			return cut(line, MaxConditionMessageBytes-len(more)) + more
		}
		b.WriteString(fmt.Sprintf("\n(%d more not shown)", len(bs)-i))
		break
	}
	return b.String()
}

// cut shortens s to at most n bytes without splitting a rune.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// standingState is the snapshot compiled for the disruption rules that need no catalog, made
// on first use.
func (d *decider) standingState() *disruption.Standing {
	if d.standing == nil {
		d.standing = disruption.NewStanding(d.snap)
	}
	return d.standing
}
