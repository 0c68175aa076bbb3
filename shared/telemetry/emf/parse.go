package emf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// metadata is the "_aws" member, decoded strictly.
type metadata struct {
	Timestamp         *int64 `json:"Timestamp"`
	CloudWatchMetrics []struct {
		Namespace  string     `json:"Namespace"`
		Dimensions [][]string `json:"Dimensions"`
		Metrics    []struct {
			Name              string `json:"Name"`
			Unit              string `json:"Unit,omitempty"`
			StorageResolution int    `json:"StorageResolution,omitempty"`
		} `json:"Metrics"`
	} `json:"CloudWatchMetrics"`
}

// validUnits are CloudWatch's StandardUnit values (CloudWatch API Reference, MetricDatum).
var validUnits = map[string]bool{"Seconds": true, "Microseconds": true, "Milliseconds": true, "Bytes": true, "Kilobytes": true,
	"Megabytes": true, "Gigabytes": true, "Terabytes": true, "Bits": true, "Kilobits": true, "Megabits": true, "Gigabits": true,
	"Terabits": true, "Percent": true, "Count": true, "Bytes/Second": true, "Kilobytes/Second": true, "Megabytes/Second": true,
	"Gigabytes/Second": true, "Terabytes/Second": true, "Bits/Second": true, "Kilobits/Second": true, "Megabits/Second": true,
	"Gigabits/Second": true, "Terabits/Second": true, "Count/Second": true, "None": true}

func parseDocument(line []byte) (Document, error) {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(line, &root); err != nil {
		return Document{}, fmt.Errorf("not a JSON object: %w", err)
	}
	var md metadata
	dec := json.NewDecoder(bytes.NewReader(root["_aws"]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&md); err != nil {
		return Document{}, fmt.Errorf("_aws: %w", err)
	}
	if md.Timestamp == nil || *md.Timestamp <= 0 {
		return Document{}, errors.New("_aws.Timestamp: required, milliseconds since the epoch")
	}
	if len(md.CloudWatchMetrics) != 1 {
		return Document{}, fmt.Errorf("_aws.CloudWatchMetrics: %d directives, this writer emits exactly 1", len(md.CloudWatchMetrics))
	}
	cw := md.CloudWatchMetrics[0]
	d := Document{Timestamp: *md.Timestamp, Namespace: cw.Namespace, Dimensions: map[string]string{},
		Values: map[string][]float64{}, Units: map[string]string{}}
	if l := len(cw.Namespace); l == 0 || l > 1024 {
		return d, errors.New("_aws.CloudWatchMetrics[0].Namespace: 1 to 1024 characters")
	}
	if len(cw.Metrics) == 0 || len(cw.Metrics) > MaxMetrics {
		return d, fmt.Errorf("_aws.CloudWatchMetrics[0].Metrics: %d metrics, want 1 to %d", len(cw.Metrics), MaxMetrics)
	}
	for i, set := range cw.Dimensions {
		if len(set) > MaxDimensions {
			return d, fmt.Errorf("_aws.CloudWatchMetrics[0].Dimensions[%d]: %d dimensions, at most %d", i, len(set), MaxDimensions)
		}
		for _, name := range set {
			var v string
			if err := json.Unmarshal(root[name], &v); err != nil || v == "" {
				return d, fmt.Errorf("dimension %q: the root must hold a non-empty string value", name)
			}
			d.Dimensions[name] = v
		}
	}
	for _, m := range cw.Metrics {
		if m.Unit != "" && !validUnits[m.Unit] {
			return d, fmt.Errorf("metric %q: unit %q is not a CloudWatch StandardUnit", m.Name, m.Unit)
		}
		vals, err := metricValues(root[m.Name])
		if err != nil {
			return d, fmt.Errorf("metric %q: %w", m.Name, err)
		}
		if _, dup := d.Values[m.Name]; dup {
			return d, fmt.Errorf("metric %q: declared twice", m.Name)
		}
		d.Values[m.Name], d.Units[m.Name] = vals, m.Unit
	}
	return d, nil
}

// metricValues reads a metric's root member: a number or an array of 1 to MaxValues numbers.
func metricValues(raw json.RawMessage) ([]float64, error) {
	if raw == nil {
		return nil, errors.New("no root member with its value")
	}
	var one float64
	if err := json.Unmarshal(raw, &one); err == nil {
		return []float64{one}, nil
	}
	var many []float64
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errors.New("value is neither a number nor an array of numbers")
	}
	if len(many) == 0 || len(many) > MaxValues {
		return nil, fmt.Errorf("%d values, want 1 to %d", len(many), MaxValues)
	}
	return many, nil
}
