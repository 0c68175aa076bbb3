package absence

import (
	"reflect"
	"testing"
	"time"
)

func TestConfirm(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var s Sightings
	steps := []struct {
		name     string
		revision int64
		at       time.Time
		suspects []string
		want     []string
	}{
		{"first sighting waits", 5, t0, []string{"a", "b"}, nil},
		{"a redelivery (same revision, same time) is no second look", 5, t0, []string{"a", "b"}, nil},
		{"an older snapshot is no second look", 4, t0.Add(time.Minute), []string{"a", "b"}, nil},
		// The agent's periodic snapshot of an unchanged cluster: same revision, 30 s later.
		{"the same revision later confirms", 5, t0.Add(30 * time.Second), []string{"a", "b"}, []string{"a", "b"}},
		// b came back: forgotten, so its next absence starts over.
		{"a higher revision confirms; one that came back is forgotten", 6, t0.Add(31 * time.Second), []string{"a"}, []string{"a"}},
		{"a returning suspect waits again", 7, t0.Add(32 * time.Second), []string{"a", "b"}, []string{"a"}},
		{"and is confirmed on the next snapshot", 8, t0.Add(33 * time.Second), []string{"b"}, []string{"b"}},
	}
	for _, st := range steps {
		if got := s.Confirm(st.revision, st.at, st.suspects); !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: Confirm(%d, %s, %v) = %v, want %v", st.name, st.revision, st.at.Format(time.RFC3339), st.suspects, got, st.want)
		}
	}
}
