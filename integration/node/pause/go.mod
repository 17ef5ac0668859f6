// The pause image's program (scripts/node.sh builds the image locally: no registry is reachable).
module braid.invalid/integration/node/pause

go 1.26.0
