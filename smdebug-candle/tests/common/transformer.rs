//! A small transformer encoder that classifies the 8x8 digits: each image is a sequence of its 8
//! pixel rows (8 features per token), embedded linearly, given a learned position embedding, run
//! through pre-norm encoder layers of multi-head self-attention and a feed-forward block,
//! mean-pooled and classified. Every layer probes its query and key projections and its attention
//! scores (`layer<i>/attn/query`, `layer<i>/attn/key`, `layer<i>/attn/scores`); the hook's
//! configuration decides which of them are recorded.

use candle_core::{D, Module, Result, Tensor};
use candle_nn::{Init, Linear, VarBuilder};
use smdebug_candle::{CandleHook, Probe};

/// Tokens per image: its pixel rows.
pub const SEQ: usize = 8;
/// Features per token: the pixels of one row.
pub const TOKEN: usize = 8;
pub const CLASSES: usize = 10;

/// The model's size.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub d_model: usize,
    pub heads: usize,
    pub layers: usize,
    /// Width of the feed-forward block's hidden layer.
    pub ffn: usize,
}

/// The names layer `layer`'s probes record under.
pub fn probe_names(layer: usize) -> [String; 3] {
    ["query", "key", "scores"].map(|what| format!("layer{layer}/attn/{what}"))
}

/// Layer norm over the last dimension, written with plain tensor ops so that it has a gradient
/// (candle-nn's fused layer norm has no backward pass).
struct Norm {
    weight: Tensor,
    bias: Tensor,
}

impl Norm {
    fn new(d: usize, vb: VarBuilder) -> Result<Norm> {
        Ok(Norm {
            weight: vb.get_with_hints(d, "weight", Init::Const(1.0))?,
            bias: vb.get_with_hints(d, "bias", Init::Const(0.0))?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        candle_nn::ops::layer_norm_slow(x, &self.weight, &self.bias, 1e-5)
    }
}

/// What one attention layer computed in a forward pass.
pub struct AttentionTrace {
    /// The query projection, `[batch, seq, d_model]` (heads side by side).
    pub query: Tensor,
    /// The key projection, `[batch, seq, d_model]`.
    pub key: Tensor,
    /// softmax(q·kᵀ/√d_head) per head, `[batch, heads, seq, seq]`; row i is where token i looks.
    pub scores: Tensor,
}

struct Attention {
    query: Linear,
    key: Linear,
    value: Linear,
    out: Linear,
    heads: usize,
    probe_query: Probe,
    probe_key: Probe,
    probe_scores: Probe,
}

impl Attention {
    fn new(cfg: &Config, layer: usize, vb: VarBuilder, hook: &mut CandleHook) -> Result<Self> {
        let d = cfg.d_model;
        let [q, k, s] = probe_names(layer);
        Ok(Attention {
            query: candle_nn::linear(d, d, vb.pp("query"))?,
            // No key bias: it adds `q·b` to every score of a query's row, which the softmax
            // takes away, so its gradient is zero up to rounding (VanishingGradient and
            // PoorWeightInitialization rightly report it: a parameter that cannot learn).
            key: candle_nn::linear_no_bias(d, d, vb.pp("key"))?,
            value: candle_nn::linear(d, d, vb.pp("value"))?,
            out: candle_nn::linear(d, d, vb.pp("out"))?,
            heads: cfg.heads,
            probe_query: hook.probe(&q, &[]),
            probe_key: hook.probe(&k, &[]),
            probe_scores: hook.probe(&s, &[]),
        })
    }

    /// `[batch, seq, d]` to `[batch, heads, seq, d / heads]`.
    fn split_heads(&self, x: &Tensor) -> Result<Tensor> {
        let (b, s, d) = x.dims3()?;
        x.reshape((b, s, self.heads, d / self.heads))?
            .transpose(1, 2)?
            .contiguous()
    }

    fn forward(&self, x: &Tensor) -> Result<(Tensor, AttentionTrace)> {
        let (b, s, d) = x.dims3()?;
        let query = self.query.forward(x)?;
        let key = self.key.forward(x)?;
        let value = self.value.forward(x)?;
        self.probe_query.record(&query);
        self.probe_key.record(&key);
        let (q, k, v) = (
            self.split_heads(&query)?,
            self.split_heads(&key)?,
            self.split_heads(&value)?,
        );
        let scale = 1.0 / ((d / self.heads) as f64).sqrt();
        let logits = (q.matmul(&k.t()?.contiguous()?)? * scale)?;
        let scores = candle_nn::ops::softmax(&logits, D::Minus1)?;
        self.probe_scores.record(&scores);
        let mixed = scores
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, s, d))?;
        let out = self.out.forward(&mixed)?;
        Ok((out, AttentionTrace { query, key, scores }))
    }
}

struct EncoderLayer {
    norm1: Norm,
    attn: Attention,
    norm2: Norm,
    ff1: Linear,
    ff2: Linear,
}

impl EncoderLayer {
    fn forward(&self, x: &Tensor) -> Result<(Tensor, AttentionTrace)> {
        let (attended, trace) = self.attn.forward(&self.norm1.forward(x)?)?;
        let x = (x + attended)?;
        let hidden = self.ff1.forward(&self.norm2.forward(&x)?)?.gelu()?;
        let x = (&x + self.ff2.forward(&hidden)?)?;
        Ok((x, trace))
    }
}

/// The classifier's logits and each layer's attention, in layer order.
pub struct Forward {
    pub logits: Tensor,
    pub attention: Vec<AttentionTrace>,
}

pub struct Transformer {
    embed: Linear,
    position: Tensor,
    layers: Vec<EncoderLayer>,
    norm: Norm,
    head: Linear,
}

impl Transformer {
    /// Builds the model's parameters under `vb` (`embed.weight`, `layer0.attn.query.weight`, …)
    /// and its probes on `hook`.
    pub fn new(cfg: Config, vb: VarBuilder, hook: &mut CandleHook) -> Result<Transformer> {
        assert_eq!(
            cfg.d_model % cfg.heads,
            0,
            "d_model splits evenly into heads"
        );
        let d = cfg.d_model;
        let mut layers = Vec::with_capacity(cfg.layers);
        for i in 0..cfg.layers {
            let vb = vb.pp(format!("layer{i}"));
            layers.push(EncoderLayer {
                norm1: Norm::new(d, vb.pp("norm1"))?,
                attn: Attention::new(&cfg, i, vb.pp("attn"), hook)?,
                norm2: Norm::new(d, vb.pp("norm2"))?,
                ff1: candle_nn::linear(d, cfg.ffn, vb.pp("ff1"))?,
                ff2: candle_nn::linear(cfg.ffn, d, vb.pp("ff2"))?,
            });
        }
        Ok(Transformer {
            embed: candle_nn::linear(TOKEN, d, vb.pp("embed"))?,
            position: vb.get_with_hints(
                (SEQ, d),
                "position.weight",
                Init::Randn {
                    mean: 0.0,
                    stdev: 0.1,
                },
            )?,
            layers,
            norm: Norm::new(d, vb.pp("norm"))?,
            head: candle_nn::linear(d, CLASSES, vb.pp("head"))?,
        })
    }

    /// `images` is `[batch, 64]`, pixel rows one after the other.
    pub fn forward(&self, images: &Tensor) -> Result<Forward> {
        let b = images.dim(0)?;
        let tokens = images.reshape((b, SEQ, TOKEN))?;
        let mut x = self.embed.forward(&tokens)?.broadcast_add(&self.position)?;
        let mut attention = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let (next, trace) = layer.forward(&x)?;
            x = next;
            attention.push(trace);
        }
        let pooled = self.norm.forward(&x)?.mean(1)?;
        let logits = self.head.forward(&pooled)?;
        Ok(Forward { logits, attention })
    }
}
