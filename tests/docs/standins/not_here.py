"""Lines dropped because they need what no test machine has yet: downloads, weights, paid APIs,
a cluster. Each area's module replaces its entries here with real stand-ins."""

SUBSTITUTIONS = {
    ("README.md", "--dataset miedb:MieDB-100k --model"): ("", "needs MieDB-100k and ip2p weights"),
    ("README.md", "medibench run --dataset suite --model openai-image"): ("", "a paid API"),
    ("README.md", "--model configs/flux.yaml"): ("", "FLUX weights, Ray"),
    ("README.md", "medibench run ... --shard 0/4"): ("", "`...` stands for the options above"),
    ("README.md", "--model gemini-image --icl-k 0"): ("", "a paid API (Gemini)"),
}
