// Package azureapi is the fake cloud's Azure Resource Manager face: the azure-sdk-for-go's own
// server fakes (armcompute/v7/fake VirtualMachinesServer, armnetwork/v8/fake InterfacesServer)
// answered from the fake cloud's state, so the real Azure provider runs through the real SDK
// clients, pipeline and long-running-operation pollers offline. It checks what ARM checks on the
// calls the provider makes (names, locations, the NIC a VM references, zones, spot eviction
// policy, custom data, image, tags) and fails with ARM's error codes as *azcore.ResponseError:
// SkuNotAvailable and quota errors at once, allocation failures at the end of the create
// operation (which leaves the VM in provisioning state Failed, as ARM does).
package azureapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	computefake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"
	networkfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8/fake"

	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
)

// Options configure the face.
type Options struct {
	// Cloud runs the VMs (capacity, boot, Node registration, preemption). Required.
	Cloud *fake.Cloud
	// SubscriptionID and ResourceGroup are the only ones that exist (other resource groups: 404
	// ResourceGroupNotFound).
	SubscriptionID, ResourceGroup string
	// Subnets are the ARM ids of the subnets that exist; a NIC in another fails with
	// InvalidResourceReference.
	Subnets []string
	// ImageVersions are the versions of AKS node image definitions by definition name
	// (2204gen2containerd); a definition not listed has DefaultImageVersions.
	ImageVersions map[string][]ImageVersion
	// Network holds the node resource group's load balancers and NSGs; nil is DefaultNetwork
	// (what AKS creates for outboundType=loadBalancer), an empty Network has none.
	Network *Network
	// Identities are the ARM ids of the user-assigned managed identities that exist, each with
	// whether the caller may assign it (holds Microsoft.ManagedIdentity/userAssignedIdentities/
	// assign/action on it). A VM naming another identity is refused.
	Identities map[string]bool
	// Quotas are the subscription's vCPU quota limits in the region by Compute usage name
	// (UsageCores, UsageLowPriorityCores, a family such as standardDSv5Family): a VM create that
	// would exceed one is refused as Compute refuses it, and the usages API lists them. A quota
	// not listed is not enforced.
	Quotas map[string]int32
	// Log receives one line per refused call.
	Log *slog.Logger
}

// Server holds the ARM resources. Safe for concurrent use.
type Server struct {
	o      Options
	region string

	mu   sync.Mutex
	vms  map[string]*armcompute.VirtualMachine // by lower-case name
	nics map[string]*armnetwork.Interface
	// customData keeps each VM's custom data, which ARM stores but never returns.
	customData map[string]string
	// failedOps are the VM names whose last create operation ended in an error.
	failedOps map[string]bool
	// exts are the VM extensions by lower-case "<vm>/<extension>", as a GET shows them.
	exts map[string]*armcompute.VirtualMachineExtension
}

// New returns the face over o.Cloud; its region is the cloud's.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Network == nil {
		o.Network = DefaultNetwork()
	}
	return &Server{o: o, region: o.Cloud.Region(), vms: map[string]*armcompute.VirtualMachine{}, nics: map[string]*armnetwork.Interface{}, customData: map[string]string{}, failedOps: map[string]bool{},
		exts: map[string]*armcompute.VirtualMachineExtension{}}
}

// ClientOptions are the options ARM clients take to talk to this face (fake transports of both
// SDK modules, chosen by the resource provider in the request path).
func (s *Server) ClientOptions() *arm.ClientOptions {
	network := networkfake.NewServerFactoryTransport(&networkfake.ServerFactory{InterfacesServer: s.interfaces(), SubnetsServer: s.subnets(),
		LoadBalancersServer: s.loadBalancers(), SecurityGroupsServer: s.securityGroups()})
	return &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: &byProvider{s: s, network: network, compute: map[string]policy.Transporter{}}}}
}

// byProvider sends Microsoft.Network calls to the network fakes and the rest to compute's, with
// one compute transport per VM name. The SDK fake keeps a long-running operation's responder
// per request path and does not drop it when the operation ends in an error, so the next create
// of the same name would replay the spent one; a create after a failed one gets a new transport
// (ARM itself starts a new operation).
type byProvider struct {
	s       *Server
	network policy.Transporter
	mu      sync.Mutex
	compute map[string]policy.Transporter // by lower-case VM name ("" for list calls)
}

var vmPathName = regexp.MustCompile(`(?i)/virtualMachines/([^/]+)`)

func (b *byProvider) Do(req *http.Request) (*http.Response, error) {
	resp, err := b.do(req)
	var aerr *armError
	if errors.As(err, &aerr) {
		return aerr.response(req), nil
	}
	return resp, err
}

func (b *byProvider) do(req *http.Request) (*http.Response, error) {
	if strings.Contains(strings.ToLower(req.URL.Path), "/providers/microsoft.network/") {
		return b.network.Do(req)
	}
	name := ""
	if m := vmPathName.FindStringSubmatch(req.URL.Path); m != nil && !strings.HasPrefix(m[1], "fake_page_") {
		name = strings.ToLower(m[1]) // a list's next pages ("…/virtualMachines/fake_page_N") stay with the list
	}
	b.mu.Lock()
	t, ok := b.compute[name]
	if !ok || (req.Method == http.MethodPut && b.s.takeFailed(name)) {
		t = computefake.NewServerFactoryTransport(&computefake.ServerFactory{VirtualMachinesServer: b.s.virtualMachines(),
			CommunityGalleryImageVersionsServer: b.s.galleryImageVersions(), UsageServer: b.s.usage(),
			VirtualMachineExtensionsServer: b.s.extensions()})
		b.compute[name] = t
	}
	b.mu.Unlock()
	// The SDK fake answers from a goroutine and panics sending its result when the caller's
	// context ended first (it closes the channel on return); the face answers at once, so the
	// call runs to its end whatever the caller's context.
	return t.Do(req.WithContext(context.WithoutCancel(req.Context())))
}

// takeFailed reports (and forgets) that the last create of name ended in an error.
func (s *Server) takeFailed(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.failedOps[name]
	delete(s.failedOps, name)
	return f
}

// VM returns the named VM as a GET shows it (without customData; see CustomData).
func (s *Server) VM(name string) (armcompute.VirtualMachine, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, ok := s.vms[strings.ToLower(name)]
	if !ok {
		return armcompute.VirtualMachine{}, false
	}
	return viewOf(vm), true
}

// CustomData returns the custom data a VM was created with (ARM keeps it, and never returns it).
func (s *Server) CustomData(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.customData[strings.ToLower(name)]
	return d, ok
}

// NIC returns the named network interface as a GET shows it.
func (s *Server) NIC(name string) (armnetwork.Interface, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nics[strings.ToLower(name)]
	if !ok {
		return armnetwork.Interface{}, false
	}
	return s.nicView(n), true
}

// NICNames lists the network interfaces, sorted.
func (s *Server) NICNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.nics))
	for _, n := range s.nics {
		out = append(out, *n.Name)
	}
	sort.Strings(out)
	return out
}

// codeRGNotFound is ARM's answer to any call on a resource group that does not exist, before
// the resource provider looks for the resource: 404 "ResourceGroupNotFound", where a missing
// resource in an existing group is 404 "ResourceNotFound" (Azure Resource Manager docs,
// "Resolve resource not found errors"). A List in a missing group is that error, not an empty
// list.
const codeRGNotFound = "ResourceGroupNotFound"

func (s *Server) rgOK(rg string) bool { return strings.EqualFold(rg, s.o.ResourceGroup) }

// armError is a refusal as ARM sends it: the HTTP status, the x-ms-error-code header and the
// body {"error": {"code": …, "message": …}} (ARM "Common API error format"), so the SDK's
// *azcore.ResponseError carries ARM's message as it does in production (the provider reads
// quota messages: "… LowPriorityCores …", "… Family Cores quota …, Current Limit: 0").
// Handlers hand one to ErrorResponder.SetError; byProvider turns it into that response.
type armError struct {
	status int
	code   string
	msg    string
}

func (e *armError) Error() string { return e.code + ": " + e.msg }

func (e *armError) response(req *http.Request) *http.Response {
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": e.code, "message": e.msg}})
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("x-ms-error-code", e.code)
	return &http.Response{StatusCode: e.status, Status: fmt.Sprintf("%d %s", e.status, http.StatusText(e.status)), Header: h,
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

// fail logs a refusal and sets it on the responder.
func (s *Server) fail(errResp *azfake.ErrorResponder, call string, e *armError) {
	s.refuse(call, e.code, e.msg)
	errResp.SetError(e)
}

func (s *Server) refuse(call, code, why string) {
	s.o.Log.Warn("azure fake refused a call", "call", call, "code", code, "reason", why)
}

// val dereferences an SDK pointer field, the zero value for nil.
func val[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
