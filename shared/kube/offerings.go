package kube

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dovetail-dev/dovetail/events"
)

// OfferingMarkKey is the ConfigMap data key of a mark: "<capacityType>_<zone>_<instanceType>"
// (and "_<scope>" for a scoped mark),
// e.g. "spot_us-east-1a_m5.large". One key per offering lets writers merge-patch single marks.
// An error names the empty or invalid field.
func OfferingMarkKey(m events.UnavailableOfferingMark) (string, error) {
	for _, f := range []struct{ path, v string }{
		{"instanceType", m.InstanceType}, {"zone", m.Zone}, {"capacityType", m.CapacityType},
	} {
		if f.v == "" {
			return "", fmt.Errorf("unavailable.%s: must not be empty", f.path)
		}
		if strings.Contains(f.v, "_") {
			return "", fmt.Errorf("unavailable.%s: %q must not contain '_'", f.path, f.v)
		}
	}
	key := m.CapacityType + "_" + m.Zone + "_" + m.InstanceType
	if m.Scope != "" {
		// A scoped mark (a placement group's) is its own entry beside the offering's unscoped one.
		if strings.Contains(m.Scope, "_") {
			return "", fmt.Errorf("unavailable.scope: %q must not contain '_'", m.Scope)
		}
		key += "_" + m.Scope
	}
	if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
		return "", fmt.Errorf("unavailable: offering key %q: %s", key, strings.Join(errs, "; "))
	}
	return key, nil
}

// decodeOfferingMarks reads the marks stored in the ConfigMap, dropping those expired at now
// (Expires <= now), sorted by instance type, zone, capacity type. Malformed entries are skipped
// and returned as errors naming the data key.
func decodeOfferingMarks(cm *corev1.ConfigMap, now time.Time) ([]events.UnavailableOfferingMark, []error) {
	if cm == nil {
		return nil, nil
	}
	var out []events.UnavailableOfferingMark
	var errs []error
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var m events.UnavailableOfferingMark
		if err := json.Unmarshal([]byte(cm.Data[k]), &m); err != nil {
			errs = append(errs, fmt.Errorf("configmap %s/%s data[%q]: %v", cm.Namespace, cm.Name, k, err))
			continue
		}
		if want, err := OfferingMarkKey(m); err != nil || want != k {
			errs = append(errs, fmt.Errorf("configmap %s/%s data[%q]: mark does not match its key (want %q, %v)", cm.Namespace, cm.Name, k, want, err))
			continue
		}
		if !m.Expires.Time.After(now) {
			continue
		}
		out = append(out, m)
	}
	sortMarks(out)
	return out, errs
}

func sortMarks(ms []events.UnavailableOfferingMark) {
	sort.Slice(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if a.InstanceType != b.InstanceType {
			return a.InstanceType < b.InstanceType
		}
		if a.Zone != b.Zone {
			return a.Zone < b.Zone
		}
		return a.CapacityType < b.CapacityType
	})
}
