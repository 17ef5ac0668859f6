// Command dradriver is braid's test DRA driver for the real node (test tooling, never shipped):
// a second DRA driver beside braid's own, as an SR-IOV DRA driver in its Multus mode is
// (k8snetworkplumbingwg/dra-driver-sriov). It publishes one ResourceSlice for its node whose
// devices carry the two attributes Multus reads from a device another driver allocated
// (multus-cni v4.3.1 pkg/draclient/draclient.go: string attributes
// k8s.cni.cncf.io/resourceName, matched with a NAD's k8s.v1.cni.cncf.io/resourceName, and
// k8s.cni.cncf.io/deviceID, the ID handed to the NAD's delegate), with IDs shaped like PCI
// addresses, and registers with the real kubelet's plugin manager through the kubeletplugin
// helper of k8s.io/dynamic-resource-allocation (the helper every Go DRA driver uses: the
// registration socket under /var/lib/kubelet/plugins_registry, the DRA gRPC service under
// /var/lib/kubelet/plugins/<driver>). The scheduler allocates its devices to claims and the
// kubelet asks it to prepare them (NodePrepareResources) and reports them through PodResources:
// what braid's delegator reads for networks that name a resource. No hardware and no CDI: a
// prepared device has no CDI device, the container gets nothing of it, the kubelet checks
// nothing about it.
//
// A device with -plain is published without Multus's attributes (a GPU, say), which Multus
// skips. When it stops (SIGTERM, SIGINT) it deletes its node's slices of its driver.
//
// Usage: dradriver -kubeconfig FILE -node node1 -driver dra.braid.test -resource braid.test/dravf -count 4
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// Multus's attribute names (multus-cni pkg/draclient/draclient.go multusResourceNameAttr,
// multusDeviceIDAttr).
const (
	resourceNameAttr = "k8s.cni.cncf.io/resourceName"
	deviceIDAttr     = "k8s.cni.cncf.io/deviceID"
)

type driver struct {
	name    string
	node    string
	devices map[string]bool
	cancel  context.CancelFunc

	mu       sync.Mutex
	prepared map[types.UID]string
}

// PrepareResourceClaims answers NodePrepareResources: each claim's allocation results of this
// driver, which must name this node's pool and one of its devices. The helper has already
// fetched the claims and refused those not allocated or of another UID.
func (d *driver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, c := range claims {
		var r kubeletplugin.PrepareResult
		if c.Status.Allocation == nil {
			r.Err = fmt.Errorf("claim %s/%s is not allocated", c.Namespace, c.Name)
			out[c.UID] = r
			continue
		}
		for _, res := range c.Status.Allocation.Devices.Results {
			if res.Driver != d.name {
				continue
			}
			if res.Pool != d.node || !d.devices[res.Device] {
				r.Err = fmt.Errorf("claim %s/%s: request %s: device %s/%s is not one of node %s's", c.Namespace, c.Name, res.Request, res.Pool, res.Device, d.node)
				break
			}
			r.Devices = append(r.Devices, kubeletplugin.Device{Requests: []string{res.Request}, PoolName: res.Pool, DeviceName: res.Device})
		}
		if r.Err == nil {
			d.mu.Lock()
			d.prepared[c.UID] = c.Namespace + "/" + c.Name
			d.mu.Unlock()
			log.Printf("prepared claim %s/%s (%s): %d devices", c.Namespace, c.Name, c.UID, len(r.Devices))
		}
		out[c.UID] = r
	}
	return out, nil
}

// UnprepareResourceClaims answers NodeUnprepareResources: nothing was made, so nothing to undo
// (idempotent: an unknown claim is fine).
func (d *driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range claims {
		delete(d.prepared, c.UID)
		log.Printf("unprepared claim %s (%s)", c.NamespacedName, c.UID)
		out[c.UID] = nil
	}
	return out, nil
}

// HandleError logs background errors; a fatal one stops the driver.
func (d *driver) HandleError(_ context.Context, err error, msg string) {
	log.Printf("%s: %v", msg, err)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cancel()
	}
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	node := flag.String("node", "", "this node's name (the pool's name too)")
	name := flag.String("driver", "dra.braid.test", "the driver's name")
	resource := flag.String("resource", "braid.test/dravf", "the devices' k8s.cni.cncf.io/resourceName")
	count := flag.Int("count", 4, "devices vf-0… with Multus's attributes")
	plain := flag.Int("plain", 0, "devices plain-0… without them")
	idPrefix := flag.String("id-prefix", "0000:00:1e", "device N's k8s.cni.cncf.io/deviceID is <prefix>.N")
	flag.Parse()
	log.SetFlags(0)
	if *node == "" || *kubeconfig == "" {
		log.Fatal("dradriver: -node and -kubeconfig are needed")
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("dradriver: %v", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("dradriver: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	d := &driver{name: *name, node: *node, devices: map[string]bool{}, cancel: cancel, prepared: map[types.UID]string{}}
	var devices []resourceapi.Device
	for i := 0; i < *count; i++ {
		res, id := *resource, fmt.Sprintf("%s.%d", *idPrefix, i)
		dev := resourceapi.Device{
			Name: fmt.Sprintf("vf-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				resourceNameAttr: {StringValue: &res},
				deviceIDAttr:     {StringValue: &id},
			},
		}
		devices = append(devices, dev)
		d.devices[dev.Name] = true
	}
	for i := 0; i < *plain; i++ {
		dev := resourceapi.Device{Name: fmt.Sprintf("plain-%d", i)}
		devices = append(devices, dev)
		d.devices[dev.Name] = true
	}

	// The helper listens in the driver's directory under the kubelet's plugins directory; it
	// does not make it.
	if err := os.MkdirAll(filepath.Join(kubeletplugin.KubeletPluginsDir, *name), 0o750); err != nil {
		log.Fatalf("dradriver: %v", err)
	}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(*name),
		kubeletplugin.NodeName(*node),
		kubeletplugin.KubeClient(client))
	if err != nil {
		log.Fatalf("dradriver: %v", err)
	}
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{*node: {Slices: []resourceslice.Slice{{Devices: devices}}}},
	}); err != nil {
		log.Fatalf("dradriver: %v", err)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		cancel()
	}()

	// The kubelet registers the driver when its plugin manager sees the socket (scripts/node.sh
	// waits for this line).
	registered := false
	for ctx.Err() == nil {
		if s := helper.RegistrationStatus(); s != nil && !registered {
			if !s.PluginRegistered {
				log.Printf("the kubelet refused driver %s: %s", *name, s.Error)
				cancel()
				break
			}
			registered = true
			log.Printf("registered driver %s on node %s: %d devices of %s", *name, *node, *count, *resource)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	helper.Stop()

	// Its slices go with it (the kubelet would delete them once it saw the driver go, later).
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	sel := fmt.Sprintf("%s=%s,%s=%s", resourceapi.ResourceSliceSelectorDriver, *name, resourceapi.ResourceSliceSelectorNodeName, *node)
	if err := client.ResourceV1().ResourceSlices().DeleteCollection(dctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: sel}); err != nil {
		log.Printf("dradriver: deleting the slices (%s): %v", sel, err)
		os.Exit(1)
	}
	log.Printf("stopped; slices of %s on %s deleted", *name, *node)
}
