// Package disruption is Dovetail's pure disruption core: which nodes may be disrupted
// (candidates), how many at once (budgets, PodDisruptionBudgets), and what consolidation does
// with them (delete empty nodes, move pods onto other nodes, replace nodes with fewer or cheaper
// ones). It performs no I/O and reads no wall clock: the snapshot's time is "now", every list
// is walked in a stable order, so the same snapshot always gives the same decision.
//
// A consolidation runs in two phases, with the cluster itself holding the state between them
// (functions stay stateless):
//
//  1. Decide (snapshot N): Consolidate picks the nodes and the replacement NodeClaims. The
//     function launches the replacements, then taints the candidates
//     karpenter.sh/disrupted=<TaintValue>:NoSchedule so nothing new lands on them.
//  2. Progress (every later snapshot): InFlight finds tainted candidates by their taint value,
//     waits for the replacements to be initialized, re-validates on the fresh snapshot that
//     every pod of the candidates still has a place (ValidateDrain), then asks for the drain,
//     and once a candidate holds no movable pod, hands it to the termination path (HandOff:
//     its NodeClaim deleted; the lifecycle function terminates the instance). A decision that cannot go on is rolled back (its candidates
//     untainted): after DrainDeficitTimeout when its replacements are ready but the pods lack
//     room (the kube-scheduler filled the replacements with other pods meanwhile), after
//     ConsolidationTimeout for any other wait (a replacement that never came, a PDB).
package disruption
