package v1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Values as Karpenter v1.14 reads them: "true" for good, a positive Go duration counted from
// the start time, anything else as if absent.
func TestDoNotDisruptActive(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	for _, c := range []struct {
		value string
		at    time.Duration // after start
		since *metav1.Time
		want  bool
	}{
		{"true", 1000 * time.Hour, &start, true},
		{"2h", 119 * time.Minute, &start, true},
		{"2h", 2 * time.Hour, &start, false}, // age 2h is not < 2h
		{"1h30m", 89 * time.Minute, &start, true},
		{"2h", 5 * time.Hour, nil, true}, // no start time: fail safe
		{"false", 0, &start, false},
		{"True", 0, &start, false},
		{"0s", 0, &start, false},
		{"-5m", 0, &start, false},
		{"2d", 0, &start, false}, // Go durations have no days
		{"", 0, &start, false},
	} {
		a := map[string]string{AnnotationDoNotDisrupt: c.value}
		if got := DoNotDisruptActive(a, c.since, start.Add(c.at)); got != c.want {
			t.Errorf("%q at +%s: %v, want %v", c.value, c.at, got, c.want)
		}
	}
	if DoNotDisruptActive(nil, &start, start.Time) {
		t.Error("no annotation protects")
	}
	if _, _, err := ParseDoNotDisrupt("soon"); err == nil || err.Error() == "" {
		t.Error("invalid value parsed")
	}
}
