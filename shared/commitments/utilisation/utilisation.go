// Package utilisation holds the one shape of a commitment's utilisation, shared by the pricing
// core (shared/commitments.Use, what a plan counted) and the audit record
// (shared/telemetry.CommitmentUse, what `dovetail cost` reads back). It imports nothing, so the
// telemetry package depends on no pricing package and the core on no telemetry package.
package utilisation

// Use is one commitment's utilisation.
type Use struct {
	Name string `json:"name"`
	// Kind is "SavingsPlan" or "Reservation" (shared/commitments.KindSavingsPlan, KindReservation).
	Kind string `json:"kind"`
	// Savings Plans: the commitment and what usage consumed of it, USD per hour at the
	// discounted rates.
	CommittedPerHour float64 `json:"committedPerHour,omitempty"`
	UsedPerHour      float64 `json:"usedPerHour,omitempty"`
	// Reservations: the instance count and how many instances are covered.
	Count int `json:"count,omitempty"`
	Used  int `json:"used,omitempty"`
	// Utilisation is used / committed, 0–1.
	Utilisation float64 `json:"utilisation"`
	// SavedPerHour is what the commitment takes off the list price of the usage it covers, USD
	// per hour: a Savings Plan's covered list usage × its rate, a reservation's covered
	// instances' list prices (they are paid for already). The ledger subtracts it from the
	// pools' list-priced spend.
	SavedPerHour float64 `json:"savedPerHour,omitempty"`
}
