package commitments

import (
	"math"
	"strings"
	"testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func od(typ, zone string, list float64) Usage {
	return Usage{InstanceType: typ, Zone: zone, Region: "us-east-1", CapacityType: apisv1.CapacityTypeOnDemand, ListPricePerHour: list}
}

// A zonal Reserved Instance applies before a regional one; spot is never covered; the Savings
// Plan covers the highest rate first and the last usage in part. Hand calculation: the plan has
// 0.20 USD/h; m6i.large (list 0.096, rate 0.5 from the rate card) first: 0.048 covered whole;
// then c6i.xlarge (list 0.17, rate 0.3) wants 0.17 × 0.7 = 0.119 of the 0.152 left: whole; the
// second c6i.xlarge: the 0.033 left covers 0.033 / 0.119 of it, cost 0.033 +
// 0.17 × (1 − 0.033/0.119) = 0.033 + 0.122857 = 0.155857.
func TestLedgerConsume(t *testing.T) {
	l := consumeLedger(t)
	spot := od("m6i.xlarge", "us-east-1a", 0.08)
	spot.CapacityType = apisv1.CapacityTypeSpot
	got := l.Consume([]Usage{od("m6i.xlarge", "us-east-1b", 0.192), spot, od("c6i.xlarge", "us-east-1a", 0.17),
		od("c6i.xlarge", "us-east-1a", 0.17), od("m6i.large", "us-east-1a", 0.096)})
	want := []float64{0, 0.08, 0.119, 0.033 + 0.17*(1-0.033/0.119), 0.048}
	for i := range want {
		if !near(got[i], want[i]) {
			t.Errorf("usage %d: %.6f, want %.6f", i, got[i], want[i])
		}
	}
	u := l.Utilisation()
	if !near(u[0].UsedPerHour, 0.20) || u[1].Used != 0 || u[2].Used != 1 {
		t.Errorf("utilisation %+v: want the plan used up, the zonal reservation used, the regional free", u)
	}
	if l.PlanningRate("c6i.xlarge", "us-east-1") != 0 {
		t.Error("planning rate with no commitment left, want 0")
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string
	}{
		{"savingsPlans: [{name: a, type: Compute, commitmentPerHour: 0, discountRate: 0.3}]", "savingsPlans[0].commitmentPerHour: must be a positive USD per hour, got 0"},
		{"savingsPlans: [{name: a, type: EC2Instance, commitmentPerHour: 1, discountRate: 0.3, region: us-east-1}]", "savingsPlans[0].instanceFamily: required"},
		{"savingsPlans: [{name: a, type: Compute, commitmentPerHour: 1, discountRate: 0.3, rates: {m6i.large: 1}}]", "savingsPlans[0].rates[m6i.large]: must be in (0, 1), got 1"},
		{"reservations: [{name: a, instanceType: m6i.large, zone: us-east-1a, region: us-east-1, count: 1}]", "reservations[0]: exactly one of zone"},
		{"reservations: [{name: a, instanceType: m6i.large, region: us-east-1, count: 1}, {name: a, instanceType: c6i.large, region: us-east-1, count: 1}]", `reservations[1].name: "a" is also reservations[0]`},
		{"reservations: [{name: a, instanceType: m6i.large, region: us-east-1, count: 1, extra: 2}]", `unknown field "extra"`},
	} {
		_, err := apisv1.ParseCommitments([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// Quote charges what Consume would for the usage alone, and consumes nothing. Hand calculation:
// a 0.10 USD/h plan at 30 %: a 0.10 list node quotes 0.07 and, once one such node is consumed
// (0.07 used), the next quotes 0.10 − (0.03 / 0.07) × 0.03 = 0.087143; a Reserved Instance
// quotes 0; spot quotes list.
func TestLedgerQuote(t *testing.T) {
	c := &apisv1.Commitments{
		SavingsPlans: []apisv1.SavingsPlan{{Name: "sp", Type: apisv1.SavingsPlanCompute, CommitmentPerHour: 0.10, DiscountRate: 0.3}},
		Reservations: []apisv1.Reservation{{Name: "ri", InstanceType: "m6i.xlarge", Region: "us-east-1", Count: 1}},
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	l := NewLedger(c)
	u := od("small", "us-east-1a", 0.10)
	if got := l.Quote(u); !near(got, 0.07) {
		t.Errorf("first quote %.6f, want 0.07", got)
	}
	if got := l.Quote(u); !near(got, 0.07) {
		t.Errorf("quote again %.6f, want 0.07 (a quote consumes nothing)", got)
	}
	if got := l.Quote(od("m6i.xlarge", "us-east-1a", 0.192)); got != 0 {
		t.Errorf("Reserved Instance quote %.6f, want 0", got)
	}
	spot := u
	spot.CapacityType = apisv1.CapacityTypeSpot
	if got := l.Quote(spot); got != 0.10 {
		t.Errorf("spot quote %.6f, want list 0.10", got)
	}
	l.Consume([]Usage{u})
	want := 0.10 - (0.03/0.07)*0.03
	if got := l.Quote(u); !near(got, want) {
		t.Errorf("second quote %.6f, want %.6f", got, want)
	}
	if got := l.Consume([]Usage{u})[0]; !near(got, want) {
		t.Errorf("Consume charged %.6f after quoting %.6f", got, want)
	}
	if l.Exhausted() {
		t.Errorf("exhausted while the Reserved Instance is left")
	}
	l.Consume([]Usage{u, od("m6i.xlarge", "us-east-1a", 0.192)})
	if !l.Exhausted() || !(*Ledger)(nil).Exhausted() {
		t.Errorf("not exhausted once the plan and the Reserved Instance are used up")
	}
	if got := (*Ledger)(nil).Quote(u); got != 0.10 {
		t.Errorf("nil ledger quote %.6f, want list", got)
	}
}

// Utilisation reports what each commitment saved below list. TestLedgerConsume's usages: the
// zonal Reserved Instance covers the m6i.xlarge in us-east-1b (0.192 saved), the regional one
// nothing; the Savings Plan saves 0.096 × 0.5 on m6i.large, 0.17 × 0.3 on the first
// c6i.xlarge and (0.033 / 0.119) × 0.17 × 0.3 on the second.
func TestUtilisationSaved(t *testing.T) {
	l := consumeLedger(t)
	l.Consume([]Usage{od("m6i.xlarge", "us-east-1b", 0.192), od("c6i.xlarge", "us-east-1a", 0.17),
		od("c6i.xlarge", "us-east-1a", 0.17), od("m6i.large", "us-east-1a", 0.096)})
	u := l.Clone().Utilisation()
	want := map[string]float64{"sp": 0.096*0.5 + 0.17*0.3 + (0.033/0.119)*0.17*0.3, "regional": 0, "zonal": 0.192}
	for _, x := range u {
		if !near(x.SavedPerHour, want[x.Name]) {
			t.Errorf("%s saved %.6f, want %.6f", x.Name, x.SavedPerHour, want[x.Name])
		}
	}
}

// consumeLedger is the ledger of TestLedgerConsume and TestUtilisationSaved: a 0.20 USD/h
// Compute Savings Plan at 30 % (50 % on m6i.large), a regional and a zonal Reserved Instance for
// one m6i.xlarge each.
func consumeLedger(t *testing.T) *Ledger {
	t.Helper()
	c := &apisv1.Commitments{
		SavingsPlans: []apisv1.SavingsPlan{{Name: "sp", Type: apisv1.SavingsPlanCompute, CommitmentPerHour: 0.20, DiscountRate: 0.3,
			Rates: map[string]float64{"m6i.large": 0.5}}},
		Reservations: []apisv1.Reservation{
			{Name: "regional", InstanceType: "m6i.xlarge", Region: "us-east-1", Count: 1},
			{Name: "zonal", InstanceType: "m6i.xlarge", Zone: "us-east-1b", Count: 1},
		},
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return NewLedger(c)
}
