package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// trimPod keeps every field a decision reads and drops the rest: a pod as the API server stores
// a Deployment's replica (service account volume and mount, defaults, IPs) plus the scheduling
// constraints and storage a decision reads.
func TestTrimPodKeepsWhatDecisionsRead(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
	full := func() *corev1.Container {
		return &corev1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: res,
			Ports:   []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}},
			Command: []string{"/pause"}, Args: []string{"-v"}, WorkingDir: "/", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
			EnvFrom:                []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
			VolumeMounts:           []corev1.VolumeMount{{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
			VolumeDevices:          []corev1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvdb"}},
			LivenessProbe:          &corev1.Probe{PeriodSeconds: 10},
			ReadinessProbe:         &corev1.Probe{PeriodSeconds: 10},
			StartupProbe:           &corev1.Probe{PeriodSeconds: 10},
			Lifecycle:              &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}},
			SecurityContext:        &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy: corev1.PullIfNotPresent, Stdin: true, StdinOnce: true, TTY: true}
	}
	sidecar := full()
	sidecar.Name, sidecar.RestartPolicy = "proxy", &always
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "scale", Labels: map[string]string{"app": "web"},
			Annotations:     map[string]string{"karpenter.sh/do-not-disrupt": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "u", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{*sidecar},
			Containers:     []corev1.Container{*full()},
			EphemeralContainers: []corev1.EphemeralContainer{{TargetContainerName: "app",
				EphemeralContainerCommon: corev1.EphemeralContainerCommon(*full())}},
			Volumes: []corev1.Volume{
				{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web-0"}}},
				{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
				{Name: "ns", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
			Affinity:     &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}},
			Tolerations:  []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule}},
			PriorityClassName: "high", Priority: ptr.To[int32](1000), SchedulerName: "default-scheduler",
			RuntimeClassName: ptr.To("gvisor"), Overhead: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "gate"}}, HostNetwork: true, NodeName: "n1",
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			ImagePullSecrets:              []corev1.LocalObjectReference{{Name: "regcred"}},
			SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
			DNSConfig:                     &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}},
			HostAliases:                   []corev1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"a"}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.0.0.35", HostIPs: []corev1.HostIP{{IP: "10.0.0.35"}},
			PodIP: "10.0.25.20", PodIPs: []corev1.PodIP{{IP: "10.0.25.20"}},
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 7}}},
	}
	want := pod.DeepCopy()
	kept := func(c corev1.Container) corev1.Container {
		return corev1.Container{Name: c.Name, Image: c.Image, Ports: c.Ports, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
	want.ManagedFields = nil
	want.Spec.InitContainers[0] = kept(want.Spec.InitContainers[0])
	want.Spec.Containers[0] = kept(want.Spec.Containers[0])
	want.Spec.EphemeralContainers[0].EphemeralContainerCommon = corev1.EphemeralContainerCommon(kept(corev1.Container(want.Spec.EphemeralContainers[0].EphemeralContainerCommon)))
	want.Spec.Volumes = []corev1.Volume{want.Spec.Volumes[1], want.Spec.Volumes[3], want.Spec.Volumes[6]} // data, scratch, tmp
	want.Spec.ImagePullSecrets, want.Spec.SecurityContext, want.Spec.DNSConfig, want.Spec.HostAliases = nil, nil, nil, nil
	want.Status.HostIP, want.Status.HostIPs, want.Status.PodIP, want.Status.PodIPs = "", nil, "", nil

	got, err := trimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("trimmed pod differs from the expected one:\ngot  %+v\nwant %+v", got.(*corev1.Pod).Spec, want.Spec)
	}

	// Only the node-local volumes dropped: none left is nil, not an empty list.
	bare := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "kube-api-access-y", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}}}}
	if got, _ := trimPod(bare); got.(*corev1.Pod).Spec.Volumes != nil {
		t.Errorf("volumes = %v, want nil", got.(*corev1.Pod).Spec.Volumes)
	}
	// Other objects only lose their managed fields.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	if got, _ := trimPod(node); got.(*corev1.Node).ManagedFields != nil || got.(*corev1.Node).Name != "n1" {
		t.Errorf("a node through the pod transform: %+v", got)
	}
}
