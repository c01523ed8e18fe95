#!/usr/bin/python3
"""Turns rendered Kubernetes manifests into what `podman kube play` can run.

podman kube play runs Deployments (one pod per replica) and ConfigMaps, but not
Services, cluster DNS or PodDisruptionBudgets, and (podman 4.3) it publishes
every containerPort on the host, so two replicas of one stage would collide.
This keeps the ConfigMaps and Deployments, drops the container ports (pods on a
podman network reach each other by IP anyway), the probes (podman would turn
an httpGet probe into a healthcheck running curl through a shell inside the
container, which these images have neither of, and a named probe port would
name no port once the ports are gone; it has no kubelet to act on readiness
anyway) and arguments that need the downward API's $(VAR) expansion, points the
orchestrator at the DNS server the run script starts, and mounts each Secret
volume from a directory of the host (<secrets>/<secret name>, which the script
fills; a Secret's items: are not honoured: the whole directory is mounted)
instead. It also writes, per headless Service, the Deployment whose pods it
selects, so the script can put the pods' addresses in DNS: the stages'
Services and the orchestrators' omnistage-orchestrator-peers alike (every pod,
ready or not, as that Service's publishNotReadyAddresses asks; podman has no
readiness anyway). Each replica of a Deployment is its own pod
(<deployment>-pod-<i>), so the three orchestrators are three pods.

The gateway dials the orchestrators' headless Service
(--orchestrator=omnistage-orchestrators:50051): its --orchestrator becomes
dns://<dns_server>/omnistage-orchestrators:50051 (gRPC then asks that DNS
server, which answers with every orchestrator pod; the gateway still checks
each one's certificate against --orchestrator_tls_server_name). A gateway
that dials a ClusterIP Service, which podman has no virtual address for, is
rewritten the same way and that Service written to the list too, so its name
answers with every pod it selects.

  for_podman.py --dns_server=10.89.77.1:5353 --services=services.txt \
      --secrets=/tmp/secrets < rendered.yaml > play.yaml
"""
import argparse
import sys

import yaml


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dns_server", required=True)
    parser.add_argument("--services", required=True,
                        help="writes 'service deployment' lines: headless Services, and those "
                             "a gateway dials")
    parser.add_argument("--secrets", required=True, help="directory of one directory per Secret")
    args = parser.parse_args()

    objects = [o for o in yaml.safe_load_all(sys.stdin) if o]
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    service_names = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
    dialled = set()  # Services a container dials with --orchestrator=NAME:PORT
    kept = []
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            kept.append(obj)
        elif obj["kind"] == "Deployment":
            labels = obj["spec"]["template"]["metadata"]["labels"]
            orchestrator = labels.get("app.kubernetes.io/component") == "orchestrator"
            for container in obj["spec"]["template"]["spec"]["containers"]:
                container.pop("ports", None)
                for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                    container.pop(probe, None)
                container["args"] = [a for a in container.get("args", []) if "$(" not in a]
                for i, arg in enumerate(container["args"]):
                    if not arg.startswith("--orchestrator="):
                        continue
                    target = arg[len("--orchestrator="):]
                    if target.rsplit(":", 1)[0] in service_names:
                        dialled.add(target.rsplit(":", 1)[0])
                        container["args"][i] = "--orchestrator=dns://%s/%s" % (args.dns_server, target)
                if orchestrator:
                    container["args"].append("--dns_server=" + args.dns_server)
            for volume in obj["spec"]["template"]["spec"].get("volumes", []):
                secret = volume.pop("secret", None)
                if secret is not None:
                    volume["hostPath"] = {"path": "%s/%s" % (args.secrets, secret["secretName"]),
                                          "type": "Directory"}
            kept.append(obj)
    with open(args.services, "w") as out:
        for svc in objects:
            if svc["kind"] != "Service":
                continue
            if svc["spec"].get("clusterIP") != "None" and svc["metadata"]["name"] not in dialled:
                continue
            for d in deployments:
                if matches(svc["spec"].get("selector"), d["spec"]["template"]["metadata"]["labels"]):
                    out.write("%s %s\n" % (svc["metadata"]["name"], d["metadata"]["name"]))
    yaml.safe_dump_all(kept, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
