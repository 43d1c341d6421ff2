# gozoo as a static binary in a minimal image, serving one model with the
# OpenAI API (docs/serve.md):
#
#   docker build -t gozoo .
#   docker run -p 8080:8080 -v /path/to/Qwen3-0.6B:/models/model:ro gozoo
#
# The weights are not in the image: mount the checkpoint folder (or a
# GGUF file, with --model /models/model.gguf) at /models.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Pure Go: the CUDA backend loads libcuda at run time, so the binary links
# nothing and runs on any Linux.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/gozoo ./cmd/gozoo

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gozoo /gozoo
EXPOSE 8080
# Inside a container the server must listen on every interface; set
# GOZOO_API_KEY (or pass --api-key) before exposing it beyond the cluster.
ENTRYPOINT ["/gozoo", "serve", "--addr", "0.0.0.0:8080"]
CMD ["--model", "/models/model"]
