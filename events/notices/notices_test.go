package notices

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/events"
)

func sample(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func one(t *testing.T, path string) Notice {
	t.Helper()
	ns, err := Decode(sample(t, path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(ns) != 1 {
		t.Fatalf("%s: %d notices, want 1", path, len(ns))
	}
	return ns[0]
}

const inst = "i-1234567890abcdef0"

// Expected values are read off the sample files by hand; deadlines follow the documented rules
// (spot and capacity-reservation warnings: time + 2 min; Health: startTime; Scheduled Events:
// NotBefore).
func TestAWSSamples(t *testing.T) {
	cases := []struct {
		file string
		want Notice
	}{
		{"aws/ec2_spot_instance_interruption_warning.json", Notice{Kind: KindSpotInterruption, Cloud: CloudAWS,
			ID: "00000000-0000-4000-8000-000000000001", Type: DetailTypeSpotInterruption, Time: utc("2026-03-02T14:05:10Z"),
			Deadline: utc("2026-03-02T14:07:10Z"), InstanceIDs: []string{inst}, Region: "us-east-2", Action: "terminate"}},
		{"aws/ec2_spot_instance_interruption_warning_stop.json", Notice{Kind: KindSpotInterruption, Cloud: CloudAWS,
			ID: "00000000-0000-4000-8000-000000000002", Type: DetailTypeSpotInterruption, Time: utc("2026-03-02T14:05:10Z"),
			Deadline: utc("2026-03-02T14:07:10Z"), InstanceIDs: []string{inst}, Region: "us-east-2", Action: "stop"}},
		// NTH's account-less ARN puts the zone where the region goes.
		{"aws/ec2_spot_instance_interruption_warning_nth_style.json", Notice{Kind: KindSpotInterruption, Cloud: CloudAWS,
			ID: "00000000-0000-4000-8000-000000000003", Type: DetailTypeSpotInterruption, Time: utc("2026-03-02T14:05:10Z"),
			Deadline: utc("2026-03-02T14:07:10Z"), InstanceIDs: []string{inst}, Zone: "us-east-1b", Region: "us-east-1", Action: "terminate"}},
		{"aws/ec2_instance_rebalance_recommendation.json", Notice{Kind: KindRebalance, Cloud: CloudAWS,
			ID: "00000000-0000-4000-8000-000000000004", Type: DetailTypeRebalance, Time: utc("2026-03-02T14:01:55Z"),
			InstanceIDs: []string{inst}, Region: "us-east-2"}},
		{"aws/ec2_capacity_reservation_instance_interruption_warning.json", Notice{Kind: KindCapacityReservationInterruption, Cloud: CloudAWS,
			ID: "00000000-0000-4000-8000-000000000030", Type: DetailTypeCapacityReservationWarn, Time: utc("2026-03-02T16:00:00Z"),
			Deadline: utc("2026-03-02T16:02:00Z"), InstanceIDs: []string{inst}, Region: "us-west-2", Action: "terminate"}},
		{"aws/aws_health_scheduled_change_dedicated_host_network_maintenance.json", Notice{Kind: KindScheduledChange, Cloud: CloudAWS,
			ID: "00000000-0000-4000-8000-000000000020", Type: "AWS_EC2_DEDICATED_HOST_NETWORK_MAINTENANCE_SCHEDULED",
			Time: utc("2026-03-02T06:27:57Z"), Deadline: utc("2026-03-16T15:10:09Z"), InstanceIDs: []string{inst}, Region: "us-east-1",
			Description: "A description of the event will be provided here"}},
		{"aws/aws_health_scheduled_change_instance_retirement.json", Notice{Kind: KindScheduledChange, Cloud: CloudAWS,
			ID: "00000000-0000-4000-8000-000000000022", Type: "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
			Time: utc("2026-03-02T06:27:57Z"), Deadline: utc("2026-03-16T15:00:00Z"), InstanceIDs: []string{inst, "i-0fedcba0987654321"},
			Region: "us-east-1", Description: "A description of the event will be provided here"}},
		{"aws/aws_health_scheduled_change_instance_reboot_maintenance.json", Notice{Kind: KindScheduledChange, Cloud: CloudAWS,
			ID: "00000000-0000-4000-8000-000000000024", Type: "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED",
			Time: utc("2026-03-02T06:27:57Z"), Deadline: utc("2026-03-16T15:00:00Z"), InstanceIDs: []string{inst},
			Region: "us-east-1", Description: "A description of the event will be provided here"}},
		// The SQS-wrapped message's Body is the first spot sample.
		{"aws/sqs_receive_message_response_spot_interruption.json", Notice{Kind: KindSpotInterruption, Cloud: CloudAWS,
			ID: "00000000-0000-4000-8000-000000000001", Type: DetailTypeSpotInterruption, Time: utc("2026-03-02T14:05:10Z"),
			Deadline: utc("2026-03-02T14:07:10Z"), InstanceIDs: []string{inst}, Region: "us-east-2", Action: "terminate"}},
	}
	for _, c := range cases {
		got := one(t, c.file)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.file, got, c.want)
		}
	}
}

func TestAWSStateChanges(t *testing.T) {
	// One sample per documented state; times are one minute apart starting 15:10.
	for i, s := range []struct{ file, state string }{
		{"pending", "pending"}, {"running", "running"}, {"stopping", "stopping"},
		{"stopped", "stopped"}, {"shutting_down", "shutting-down"}, {"terminated", "terminated"},
	} {
		n := one(t, "aws/ec2_instance_state_change_"+s.file+".json")
		if n.Kind != KindStateChange || n.State != s.state || n.InstanceIDs[0] != inst || !n.Deadline.IsZero() {
			t.Errorf("%s: got %+v", s.file, n)
		}
		if want := utc("2026-03-02T15:10:00Z").Add(time.Duration(i) * time.Minute); !n.Time.Equal(want) {
			t.Errorf("%s: time %v, want %v", s.file, n.Time, want)
		}
	}
}

func TestAzureScheduledEvents(t *testing.T) {
	cases := []struct {
		file        string
		incarnation int
		want        []Notice
	}{
		{"azure/scheduled_events_preempt_spot.json", 1, []Notice{{Kind: KindPreemption, Cloud: CloudAzure,
			ID: "A123BC45-1234-5678-AB90-ABCDEF123456", Type: "Preempt", Action: "Preempt", State: "Scheduled",
			Deadline: utc("2021-03-16T00:58:46Z"), InstanceIDs: []string{"myspotvm"}}}},
		{"azure/scheduled_events_preempt_spot_aks_vmss.json", 1, []Notice{{Kind: KindPreemption, Cloud: CloudAzure,
			ID: "A123BC45-1234-5678-AB90-ABCDEF123457", Type: "Preempt", Action: "Preempt", State: "Scheduled",
			Deadline: utc("2026-03-02T19:52:09Z"), InstanceIDs: []string{"aks-spotpool-12345678-vmss_3"}}}},
		{"azure/scheduled_events_terminate_vmss.json", 4, []Notice{{Kind: KindTermination, Cloud: CloudAzure,
			ID: "A123BC45-1234-5678-AB90-ABCDEF123458", Type: "Terminate", Action: "Terminate", State: "Scheduled",
			Deadline: utc("2026-03-02T20:05:00Z"), InstanceIDs: []string{"aks-nodepool1-12345678-vmss_0"}}}},
		{"azure/scheduled_events_reboot_platform_aks_vmss.json", 1, []Notice{{Kind: KindScheduledChange, Cloud: CloudAzure,
			ID: "602d9444-d2cd-49c7-8624-8643e7171297", Type: "Reboot", Action: "Reboot", State: "Scheduled",
			Deadline: utc("2016-09-19T18:29:47Z"), InstanceIDs: []string{"FrontEnd_IN_0", "aks-spotcpu2d2as-24469130-vmss_1"},
			Description: "Host server is undergoing maintenance"}}},
		{"azure/scheduled_events_freeze_live_migration_scheduled.json", 2, []Notice{{Kind: KindScheduledChange, Cloud: CloudAzure,
			ID: "C7061BAC-AFDC-4513-B24B-AA5F13A16123", Type: "Freeze", Action: "Freeze", State: "Scheduled",
			Deadline: utc("2026-04-11T22:26:58Z"), InstanceIDs: []string{"WestNO_0", "WestNO_1"},
			Description: "Virtual machine is being paused because of a memory-preserving Live Migration operation."}}},
		// Started: NotBefore is empty, so there is no deadline left.
		{"azure/scheduled_events_freeze_live_migration_started.json", 3, []Notice{{Kind: KindScheduledChange, Cloud: CloudAzure,
			ID: "C7061BAC-AFDC-4513-B24B-AA5F13A16123", Type: "Freeze", Action: "Freeze", State: "Started",
			InstanceIDs: []string{"WestNO_0", "WestNO_1"},
			Description: "Virtual machine is being paused because of a memory-preserving Live Migration operation."}}},
		{"azure/scheduled_events_empty.json", 1, nil},
	}
	for _, c := range cases {
		doc, err := DecodeScheduledEvents(sample(t, c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if doc.Incarnation != c.incarnation || !reflect.DeepEqual(doc.Notices, c.want) {
			t.Errorf("%s:\n got %d %+v\nwant %d %+v", c.file, doc.Incarnation, doc.Notices, c.incarnation, c.want)
		}
	}
}

func TestAzureEventGridBothSchemas(t *testing.T) {
	const sub = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-fake-nodes/providers/Microsoft.Compute/"
	vm, vmss := sub+"virtualMachines/vm-fake-01", sub+"virtualMachineScaleSets/aks-nodepool1-12345678-vmss/virtualMachines/0"
	cases := []struct {
		base string
		want Notice
	}{
		{"eventgrid_health_availability_status_changed", Notice{Kind: KindAvailabilityChange, Cloud: CloudAzure,
			ID: "00000000-0000-4000-8000-000000000060", Type: EventGridAvailabilityStatusChanged, Time: utc("2023-07-24T19:20:37.9245071Z"),
			ResourceIDs: []string{vm}, InstanceIDs: []string{"vm-fake-01"}, State: "Available", Description: "Unavailable -> Available"}},
		{"eventgrid_health_availability_status_unavailable_vmss_vm", Notice{Kind: KindAvailabilityChange, Cloud: CloudAzure,
			ID: "00000000-0000-4000-8000-000000000063", Type: EventGridAvailabilityStatusChanged, Time: utc("2026-03-02T19:52:40Z"),
			ResourceIDs: []string{vmss}, InstanceIDs: []string{"aks-nodepool1-12345678-vmss_0"}, State: "Unavailable", Description: "Available -> Unavailable"}},
		{"eventgrid_health_resource_annotated_deallocation", Notice{Kind: KindStateChange, Cloud: CloudAzure,
			ID: "00000000-0000-4000-8000-000000000061", Type: EventGridResourceAnnotated, Time: utc("2023-07-24T19:20:37.9245071Z"),
			ResourceIDs: []string{vm}, InstanceIDs: []string{"vm-fake-01"}, State: StateDeallocating, Action: AnnotationVMDeallocationInitiated,
			Description: "This virtual machine is stopped and deallocated as requested by an authorized user or process."}},
		{"eventgrid_health_resource_annotated_spot_preempted", Notice{Kind: KindPreemption, Cloud: CloudAzure,
			ID: "00000000-0000-4000-8000-000000000062", Type: EventGridResourceAnnotated, Time: utc("2026-03-02T19:52:39.1234567Z"),
			Deadline: utc("2026-03-02T19:52:39.1234567Z"), ResourceIDs: []string{vmss}, InstanceIDs: []string{"aks-nodepool1-12345678-vmss_0"},
			Action:      AnnotationVMPreempted,
			Description: "If you're running a Spot/Low Priority Virtual Machine, it has been preempted either due to capacity recall by the platform or due to billing-based eviction where cost exceeded user defined thresholds. No other action is required at this time."}},
	}
	for _, c := range cases {
		for _, schema := range []string{"cloudevent", "eventgrid"} {
			file := "azure/" + c.base + "_" + schema + ".json"
			got := one(t, file)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s:\n got %+v\nwant %+v", file, got, c.want)
			}
		}
	}
	// Event Grid push delivery wraps events in an array.
	batch := "[" + string(sample(t, "azure/eventgrid_health_resource_annotated_spot_preempted_eventgrid.json")) + "," +
		string(sample(t, "azure/eventgrid_health_availability_status_changed_cloudevent.json")) + "]"
	ns, err := Decode([]byte(batch))
	if err != nil || len(ns) != 2 || ns[0].Kind != KindPreemption || ns[1].Kind != KindAvailabilityChange {
		t.Fatalf("batch: %v %+v", err, ns)
	}
}

func TestMatchesProviderID(t *testing.T) {
	spot := one(t, "aws/ec2_spot_instance_interruption_warning.json")
	if !spot.MatchesProviderID("aws:///us-east-2a/" + inst) {
		t.Error("aws providerID with the same instance id must match")
	}
	if spot.MatchesProviderID("aws:///us-east-2a/i-0fedcba0987654321") || spot.MatchesProviderID("") {
		t.Error("another instance must not match")
	}
	// Scheduled Events name a VMSS instance "<set>_<n>"; the node's providerID is the resource id,
	// which the name becomes within the scale set of the VM that read the document.
	pid := "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-spotpool-12345678-vmss/virtualMachines/3"
	reader := strings.TrimSuffix(pid[len("azure://"):], "3") + "0"
	ns, err := Decode([]byte(wrapScheduledEvents(reader, string(sample(t, "azure/scheduled_events_preempt_spot_aks_vmss.json")))))
	if err != nil {
		t.Fatal(err)
	}
	if !ns[0].MatchesProviderID(pid) {
		t.Errorf("VMSS instance 3 of aks-spotpool-12345678-vmss must match aks-spotpool-12345678-vmss_3 (resource ids %v)", ns[0].ResourceIDs)
	}
	if ns[0].MatchesProviderID(strings.TrimSuffix(pid, "3") + "4") {
		t.Error("instance 4 must not match")
	}
	// The same document without the reader's resource id names VMs only: it matches no node.
	doc, err := DecodeScheduledEvents(sample(t, "azure/scheduled_events_preempt_spot_aks_vmss.json"))
	if err != nil {
		t.Fatal(err)
	}
	if doc.Notices[0].MatchesProviderID(pid) {
		t.Error("a VM name alone matched a node")
	}
	// Event Grid gives the resource id; Azure resource ids compare case-insensitively.
	eg := one(t, "azure/eventgrid_health_resource_annotated_spot_preempted_cloudevent.json")
	if !eg.MatchesProviderID("azure://" + strings.ToLower(eg.ResourceIDs[0])) {
		t.Error("resource id must match case-insensitively")
	}
}

// wrapScheduledEvents wraps a Scheduled Events document as Dovetail's publisher does: a CloudEvent
// whose subject is the resource id of the VM that read it.
func wrapScheduledEvents(reader, doc string) string {
	return `{"specversion":"1.0","id":"scheduled-events-1","source":"dovetail/dev/scheduled-events","type":"` + ScheduledEventsCloudEventType +
		`","time":"2021-03-16T00:58:20Z","subject":"` + reader + `","datacontenttype":"application/json","data":` + doc + `}`
}

// Two VMs named alike in different resource groups (or subscriptions) are different VMs (Azure
// docs, "Naming rules and restrictions for Azure resources": a VM name is unique within its
// resource group): a notice about one is never a notice about the other, whether it comes from
// Event Grid (its targetResourceId) or from Scheduled Events (the name, resolved in the reading
// VM's resource group). Resource ids compare case-insensitively.
func TestSameNamedVMsInOtherResourceGroups(t *testing.T) {
	const sub, other = "00000000-0000-0000-0000-000000000000", "11111111-1111-1111-1111-111111111111"
	ours := "/subscriptions/" + sub + "/resourceGroups/MC_rg_dovetail_eastus/providers/Microsoft.Compute/virtualMachines/myspotvm"
	theirsRG := "/subscriptions/" + sub + "/resourceGroups/rg-someone-else/providers/Microsoft.Compute/virtualMachines/myspotvm"
	theirsSub := "/subscriptions/" + other + "/resourceGroups/MC_rg_dovetail_eastus/providers/Microsoft.Compute/virtualMachines/myspotvm"
	doc := strings.TrimSpace(string(sample(t, "azure/scheduled_events_preempt_spot.json"))) // names "myspotvm"
	for _, c := range []struct {
		name, reader string
		ours         bool
	}{
		{"read by our VM", ours, true},
		{"read by our VM, ids in other case", strings.ToLower(ours), true},
		{"read in another resource group", theirsRG, false},
		{"read in another subscription", theirsSub, false},
	} {
		ns, err := Decode([]byte(wrapScheduledEvents(c.reader, doc)))
		if err != nil || len(ns) != 1 {
			t.Fatalf("%s: %v %+v", c.name, err, ns)
		}
		if got := ns[0].MatchesProviderID("azure://" + ours); got != c.ours {
			t.Errorf("%s: matches our node = %v, want %v (resource ids %v)", c.name, got, c.ours, ns[0].ResourceIDs)
		}
	}
	eg := string(sample(t, "azure/eventgrid_health_resource_annotated_spot_preempted_cloudevent.json"))
	n := one(t, "azure/eventgrid_health_resource_annotated_spot_preempted_cloudevent.json")
	v, ok := ParseAzureVMID(n.ResourceIDs[0])
	if !ok {
		t.Fatalf("sample's targetResourceId %q is not a VM id", n.ResourceIDs[0])
	}
	elsewhere := v
	elsewhere.ResourceGroup = "rg-someone-else"
	ns, err := Decode([]byte(strings.ReplaceAll(eg, n.ResourceIDs[0], elsewhere.String())))
	if err != nil || len(ns) != 1 {
		t.Fatalf("event grid: %v %+v", err, ns)
	}
	if ns[0].MatchesProviderID("azure://" + v.String()) {
		t.Errorf("a preemption of %s matched the same-named node %s", elsewhere, v)
	}
	if !ns[0].MatchesProviderID("azure://" + elsewhere.String()) {
		t.Errorf("a preemption of %s did not match its own node", elsewhere)
	}
}

// ParseAzureVMID reads both VM id shapes, any segment case, and refuses anything else.
func TestParseAzureVMID(t *testing.T) {
	for id, want := range map[string]AzureVMID{
		"/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/vm":                            {Subscription: "s", ResourceGroup: "g", Name: "vm"},
		"/subscriptions/s/resourcegroups/g/providers/microsoft.compute/virtualmachines/vm":                            {Subscription: "s", ResourceGroup: "g", Name: "vm"},
		"/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/set/virtualMachines/7": {Subscription: "s", ResourceGroup: "g", ScaleSet: "set", Name: "7"},
	} {
		if got, ok := ParseAzureVMID(id); !ok || got != want {
			t.Errorf("%s: %+v %v, want %+v", id, got, ok, want)
		}
	}
	for _, id := range []string{"", "myspotvm", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/a",
		"/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/vm/extensions/x",
		"/subscriptions//resourceGroups/g/providers/Microsoft.Compute/virtualMachines/vm"} {
		if got, ok := ParseAzureVMID(id); ok {
			t.Errorf("%q parsed as %+v", id, got)
		}
	}
}

func TestRefusals(t *testing.T) {
	spot := string(sample(t, "aws/ec2_spot_instance_interruption_warning.json"))
	health := string(sample(t, "aws/aws_health_scheduled_change_instance_retirement.json"))
	se := string(sample(t, "azure/scheduled_events_preempt_spot.json"))
	ann := string(sample(t, "azure/eventgrid_health_resource_annotated_spot_preempted_cloudevent.json"))
	cases := []struct {
		name, data, field string
	}{
		// A real event Dovetail does not handle is refused, not dropped.
		{"asg lifecycle", string(sample(t, "aws/autoscaling_instance_terminate_lifecycle_action.json")), "detail-type"},
		{"no instance id", strings.Replace(spot, `"instance-id": "i-1234567890abcdef0",`, "", 1), "detail.instance-id"},
		{"bad instance id", strings.Replace(spot, `"instance-id": "i-1234567890abcdef0"`, `"instance-id": "i-xyz"`, 1), "detail.instance-id"},
		{"unknown action", strings.Replace(spot, `"terminate"`, `"explode"`, 1), "detail.instance-action"},
		{"bad time", strings.Replace(spot, `"2026-03-02T14:05:10Z"`, `"yesterday"`, 1), "time"},
		{"arn mismatch", strings.Replace(spot, "instance/i-1234567890abcdef0", "instance/i-0fedcba0987654321", 1), "resources[0]"},
		{"no detail", strings.Replace(spot, `"detail": {`, `"detail2": {`, 1), "detail"},
		{"bad state", strings.Replace(string(sample(t, "aws/ec2_instance_state_change_stopped.json")), `"stopped"`, `"melted"`, 1), "detail.state"},
		{"health issue", strings.Replace(health, `"scheduledChange"`, `"issue"`, 1), "detail.eventTypeCategory"},
		{"health rds", strings.Replace(health, `"service": "EC2"`, `"service": "RDS"`, 1), "detail.service"},
		{"health bad start", strings.Replace(health, `"startTime": "Mon, 16 Mar 2026 15:00:00 GMT"`, `"startTime": "2026-03-16"`, 1), "detail.startTime"},
		{"health bad entity", strings.Replace(health, `"entityValue": "i-0fedcba0987654321"`, `"entityValue": "vol-1"`, 1), "detail.affectedEntities[1].entityValue"},
		{"se unknown type", strings.Replace(se, `"Preempt"`, `"Levitate"`, 1), "Events[0].EventType"},
		{"se bad notbefore", strings.Replace(se, `"Tue, 16 Mar 2021 00:58:46 GMT"`, `"soon"`, 1), "Events[0].NotBefore"},
		{"se no resources", strings.Replace(se, `"myspotvm"`, ``, 1), "Events[0].Resources"},
		{"eg unknown annotation", strings.Replace(ann, AnnotationVMPreempted, "VirtualMachineRestarted", 1), "data.resourceInfo.properties.annotationName"},
		{"eg storage account", strings.Replace(ann, `"targetResourceType": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"`, `"targetResourceType": "Microsoft.Storage/storageAccounts"`, 1), "data.resourceInfo.properties.targetResourceType"},
		{"eg unknown type", strings.Replace(ann, EventGridResourceAnnotated, "Microsoft.Resources.ResourceWriteSuccess", 1), "type"},
		{"not json", "{", "notice"},
		{"unknown format", `{"hello":"world"}`, "notice"},
		{"empty", "  ", "notice"},
		{"sqs bad body", `{"Messages":[{"MessageId":"m1","Body":"{\"version\":\"0\"}"}]}`, "Messages[0].Body"},
	}
	for _, c := range cases {
		_, err := Decode([]byte(c.data))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !errors.Is(err, events.ErrMalformed) {
			t.Errorf("%s: %v does not wrap events.ErrMalformed", c.name, err)
		}
		if !strings.Contains(err.Error(), c.field+":") {
			t.Errorf("%s: %v does not name field %q", c.name, err, c.field)
		}
	}
}

// A Scheduled Events document wrapped by Dovetail's publisher (ScheduledEventsCloudEventType)
// decodes as the document does, alone or in an Event Grid push batch next to a HealthResources
// event; a wrapper that is not a document names the field.
func TestScheduledEventsCloudEvent(t *testing.T) {
	doc := strings.TrimSpace(string(sample(t, "azure/scheduled_events_preempt_spot.json")))
	const reader = "/subscriptions/s/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachines/aks-spot-1"
	wrap := func(ct, data string) string {
		return `{"specversion":"1.0","id":"scheduled-events-1","source":"dovetail/dev/scheduled-events","type":"` + ScheduledEventsCloudEventType +
			`","time":"2021-03-16T00:58:20Z","subject":"` + reader + `","datacontenttype":"` + ct + `","data":` + data + `}`
	}
	want := Notice{Kind: KindPreemption, Cloud: CloudAzure, ID: "A123BC45-1234-5678-AB90-ABCDEF123456", Type: "Preempt", Action: "Preempt",
		State: "Scheduled", Deadline: utc("2021-03-16T00:58:46Z"), InstanceIDs: []string{"myspotvm"},
		ResourceIDs: []string{"/subscriptions/s/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachines/myspotvm"}}
	got, err := Decode([]byte(wrap("application/json", doc)))
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("one event: %+v, %v; want %+v", got, err, want)
	}
	health := strings.TrimSpace(string(sample(t, "azure/eventgrid_health_resource_annotated_spot_preempted_cloudevent.json")))
	got, err = Decode([]byte("[" + health + "," + wrap("application/json", doc) + "]"))
	if err != nil || len(got) != 2 || got[0].Kind != KindPreemption || !reflect.DeepEqual(got[1], want) {
		t.Fatalf("batch: %+v, %v", got, err)
	}
	// A document without events is valid and gives no notice.
	if got, err := Decode([]byte(wrap("application/json", `{"DocumentIncarnation":2,"Events":[]}`))); err != nil || len(got) != 0 {
		t.Fatalf("empty document: %+v, %v", got, err)
	}
	// The same document as data_base64 (CloudEvents' other encoding of data), or under a
	// datacontenttype in other case or with parameters, is the same document.
	b64 := strings.Replace(wrap("application/json", "1"), `"data":1`, `"data_base64":"`+base64.StdEncoding.EncodeToString([]byte(doc))+`"`, 1)
	for name, event := range map[string]string{
		"data_base64":    b64,
		"upper case":     wrap("Application/JSON", doc),
		"with parameter": wrap("application/json; charset=utf-8", doc),
	} {
		if got, err := Decode([]byte(event)); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, want)
		}
	}
	for name, c := range map[string]struct{ event, field string }{
		"bad base64":        {strings.Replace(b64, `"data_base64":"`, `"data_base64":"!`, 1), "data_base64"},
		"base64 not a doc":  {strings.Replace(wrap("application/json", "1"), `"data":1`, `"data_base64":"`+base64.StdEncoding.EncodeToString([]byte(`{"Events":[]}`))+`"`, 1), "data_base64: malformed event: notice: DocumentIncarnation"},
		"data and base64":   {strings.Replace(wrap("application/json", doc), `"data":`, `"data_base64":"eA==","data":`, 1), "data_base64"},
		"json-ish type":     {wrap("application/jsonl", doc), "datacontenttype"},
		"not a document":    {"[" + health + "," + wrap("application/json", `{"Events":[{"EventType":"Preempt"}]}`) + "]", "[1].data"},
		"not json":          {wrap("application/octet-stream", `"garbage"`), "datacontenttype"},
		"no data":           {strings.Replace(wrap("application/json", "1"), `,"data":1`, "", 1), "data"},
		"no id":             {strings.Replace(wrap("application/json", doc), `"id":"scheduled-events-1",`, "", 1), "id"},
		"other specversion": {strings.Replace(wrap("application/json", doc), `"specversion":"1.0"`, `"specversion":"0.3"`, 1), "specversion"},
		// Without the reading VM's resource id the names could be any VM's of that name.
		"no subject":     {strings.Replace(wrap("application/json", doc), `"subject":"`+reader+`",`, "", 1), "subject: required"},
		"subject a name": {strings.Replace(wrap("application/json", doc), reader, "aks-spot-1", 1), `subject: "aks-spot-1" is not a VM resource ID`},
		// The document in the Event Grid schema is refused for what it is, not for lacking a
		// HealthResources field.
		"event grid schema": {`{"id":"scheduled-events-1","topic":"t","subject":"aks-spot-1","eventType":"` + ScheduledEventsCloudEventType +
			`","eventTime":"2021-03-16T00:58:20Z","dataVersion":"1","data":` + doc + `}`, "eventType: \"" + ScheduledEventsCloudEventType + "\" is a Scheduled Events document"},
	} {
		_, err := Decode([]byte(c.event))
		if !errors.Is(err, events.ErrMalformed) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want malformed naming %q", name, err, c.field)
		}
	}
}
