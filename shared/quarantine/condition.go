package quarantine

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// ConditionWorkloadsQuarantined is Dovetail's NodePool condition for this rule, written by the
// lifecycle function alone (it writes every NodePool condition): True while workloads whose sick
// pods run on the pool's nodes have pending replicas held, naming the controllers ("pending
// replicas held: Deployment default/web"); False otherwise. A
// condition of its own, outside Ready's dependents, so Karpenter's Ready keeps its meaning.
const ConditionWorkloadsQuarantined = "WorkloadsQuarantined"

// Reasons of ConditionWorkloadsQuarantined.
const (
	ReasonSickWorkloads   = "SickWorkloads"
	ReasonNoSickWorkloads = "NoSickWorkloads"
	ReasonDisabled        = "QuarantineDisabled"
	// ReasonInvalidSettings: a quarantine annotation of the pool is malformed (the message names
	// it); its default applies, and the status still says whether workloads are held.
	ReasonInvalidSettings = "InvalidQuarantineSettings"
)

// maxConditionMessage bounds the message: kubectl shows it in one line, and the Events name each
// controller's evidence.
const maxConditionMessage = 1024

// PoolCondition is np's ConditionWorkloadsQuarantined under the rule's result on a snapshot
// (observedGeneration left to the caller).
func PoolCondition(res Result, np *apisv1.NodePool) metav1.Condition {
	c := metav1.Condition{Type: ConditionWorkloadsQuarantined, Status: metav1.ConditionFalse, Reason: ReasonNoSickWorkloads}
	var held []string
	for i := range res.Verdicts {
		if v := &res.Verdicts[i]; v.NodePool == np.Name {
			// Names only: counts change with every pod that binds or restarts, and each change
			// would be a status write (and a new snapshot); the Events carry the evidence.
			held = append(held, v.Controller.String())
		}
	}
	s, err := ParseSettings(np)
	switch {
	case len(held) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonSickWorkloads, "pending replicas held: "+strings.Join(held, ", ")
	case s.Disabled:
		c.Reason, c.Message = ReasonDisabled, AnnotationQuarantine+": "+ValueDisabled
	}
	if err != nil {
		c.Reason = ReasonInvalidSettings
		c.Message = strings.TrimPrefix(strings.TrimSpace(err.Error()+" (defaults apply); "+c.Message), "; ")
	}
	c.Message = strings.TrimSuffix(c.Message, "; ")
	if len(c.Message) > maxConditionMessage {
		c.Message = c.Message[:maxConditionMessage-3] + "..."
	}
	return c
}
