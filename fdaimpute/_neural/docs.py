"""Parameter and attribute descriptions shared by VTImputer and SANDImputer."""

from fdaimpute._core.docstrings import fill_docstring

COMMON_PARAMS_DOC = """
    preset : {"cpu", "gpu", "paper"}, default="cpu"
        Source of every size and training setting left at ``None``:
        ``"cpu"`` trains in minutes on a laptop CPU (3 encoder layers, one
        decoder layer, width 32, 2 heads, 100 epochs, batches of 64, lr
        1e-3 with cosine decay, no early stopping); ``"gpu"`` is the best
        of four settings measured for four minutes on one GPU (the paper's
        6 + 6 layers of width 128 with the CPU preset's recipe, 200 epochs,
        batches of 256; about 1.3 s an epoch at n = 10,000 on an H200
        shared with three other fits, with ``cuda_graph``); ``"paper"`` is
        the SAND
        paper's released configuration (6 + 6 layers, width 128, 2 heads,
        dropout 0.15, encoding 120, 5,000 epochs, batches of 256, lr 3e-4),
        meant for a GPU. ``base`` and ``norm`` are not taken from the
        preset: the paper's networks are ``base=None``.
    base : {"auto", "pace", "kernel", None} or imputer, default="auto"
        A statistical base for the network to improve on. ``"pace"`` is a
        :class:`~fdaimpute.PACEImputer`; ``"auto"`` is ``"pace"`` where
        PACE can be fitted on the training subjects, and otherwise (fewer
        than 3 distinct times, single observations, constant values) the
        network alone, with a warning saying why (``base_`` is then None);
        ``"kernel"`` is a
        :class:`~fdaimpute.KernelImputer`; an imputer instance is cloned.
        The base is fitted inside ``fit`` on the training subjects only
        (``split_["train"]``, never the validation subjects) and then
        computed, for each subject, from the same observations the encoder
        sees. The output is the base's curve ``b`` corrected towards the
        network's own curve ``f``: ``b + g * (f - b)``, with a learnt weight
        ``g`` that starts at zero (for SAND, ``f`` is SAND's curve and the
        derivative is ``b' + g * (f' - b')``, so curves stay C1). The
        network learns from its own curves, as without a base, and ``g``
        from the mix's error on the training subjects, which reaches ``g``
        alone (``base_weight="detached"`` of :class:`~fdaimpute.nn.Trainer`;
        a network that also learnt from the mix's error served the mix and
        was weaker: ``docs/benchmarks.md``, base-weight). The untrained
        network is the base: it is scored on the validation subjects before
        the first epoch, so an epoch replaces it only if its held-out error
        is lower; the validation subjects are split in two
        (``split_["selection"]`` choose the epoch, ``split_["comparison"]``
        judge it) and the chosen epoch is kept only if, on the second half,
        its error is below the base's by at least one standard error
        (paired over subjects, each subject's error pooled over eight draws
        of its hidden points; ``start_gain_``), else the imputer *is* the
        base (``best_epoch_ == -1``). Either way the base is then refitted
        on every subject (the network's own curve does not depend on it).
        Without validation subjects (``validation_fraction=0``) the epoch is
        chosen by training loss and none of this holds. ``None``: the
        network alone. PACE is the default base because with it the
        networks were within 1.1% of PACE's held-out error on the real data
        sets scored, and at or below the network alone on the non-linear
        processes, while the network alone was 4-18% above PACE on the real
        data and the paper's process (``docs/benchmarks.md``);
        it costs one PACE fit, seconds. On several variables
        (a ``MultivariateIrregularData``) ``"auto"`` and ``"pace"`` are a
        :class:`~fdaimpute.MultivariatePACEImputer` (``"kernel"`` is
        refused; an imputer given must take several variables), the weight
        ``g`` is one per variable and the comparison is made on each
        variable's hidden points apart: a variable on which the network
        does not beat the base keeps the base's curves (``g = 0``; the base
        is then refitted on every subject), and the imputer is the base
        only when that holds for every variable.
    covariates : list of str, default=None
        Subject covariates (names in ``X.covariates`` of a
        ``MultivariateIrregularData``, or columns of a long frame read with
        ``covariates=``) that the network reads: numeric ones centred and
        scaled by their training SD, categorical ones one-hot encoded
        against their most frequent training level; together they make one
        more encoder token, always visible, that every observation and grid
        query can attend to. ``transform`` then needs every subject's
        values of them. The multivariate PACE base reads them too (as its
        ``covariates``: a covariate-adjusted mean). ``None``: no
        covariates, whatever ``X`` carries.
    d_model : int, default=None
        Width of the transformer's tokens.
    n_heads : int, default=None
        Attention heads (must divide ``d_model``).
    encoder_layers : int, default=None
        Encoder depth (self-attention among the observations).
    decoder_layers : int, default=None
        Decoder depth (self-attention among grid queries, cross-attention
        to the observations).
    dim_feedforward : int, default=None
        Hidden width of the feed-forward blocks.
    dropout : float, default=None
        Dropout in the transformer.
    norm : {"layer", "batch", "rms", None}, default="layer"
        Normalisation in the transformer's residual blocks (not taken from
        the preset): ``"layer"`` (LayerNorm), ``"batch"`` (batch
        normalisation over the real tokens of a batch, running statistics
        at inference), ``"rms"`` (RMSNorm) or ``None`` (none; a stack
        without normalisation may need a lower ``lr``). Compared in
        ``docs/benchmarks.md``.
    encoding_dim : int, default=None
        Features of the sinusoidal time encoding (even).
    max_epochs : int, default=None
        Passes over the training subjects.
    batch_size : int, default=None
        Subjects per optimizer step.
    lr : float, default=None
        Adam's (peak) learning rate.
    lr_schedule : {"cosine", "constant"}, default=None
        ``"cosine"``: linear warm-up over 2% of the steps (at least 100, or
        half of a shorter run), then cosine decay to 2% of ``lr`` at
        ``max_epochs``.
    patience : int, default=None
        Stop after this many epochs without a better validation error (the
        CPU preset runs all epochs, as the cosine schedule improves most at
        the end; the best epoch is kept either way).
    max_time : float, default=None
        Time budget of the training epochs, in seconds (validation
        included; the base, the error model and the calibration folds come
        on top). After each epoch the run is re-planned to the epochs that
        still fit, at most ``max_epochs``, and the learning-rate schedule
        ends at the last of them, so a budget gives a complete, annealed
        run (``stop_reason_ == "max_time"`` when it cut the epochs). The
        number of epochs then depends on the machine's speed: set
        ``max_epochs`` instead for results that repeat exactly.
    visible_weight : float in [0, 1], default=None
        Weight in the training loss of the points the encoder is shown,
        relative to the points hidden from it (training hides 1 to half of
        each subject's points and scores the curve at all of them). ``1``
        scores all alike, as the SAND paper does (the ``"paper"`` preset);
        a network scored at points it sees learns in part to reproduce
        their noise. The CPU preset's ``0.2`` is measured against 1 and 0 in
        ``docs/benchmarks.md`` (section ``visible-weight``).
    validation_fraction : float or "auto", default=0.1
        Share of the training subjects held out (``split_``) to choose the
        epoch whose weights are kept (about a third of their points, 1 to
        half of each subject's, are hidden and predicted from the rest) and
        then to fit the error model behind ``return_std``. ``"auto"``: 50
        subjects, but at least 10% and at most 30% of them (small data sets
        need a larger share to tell a real gain from chance). ``0`` keeps
        the epoch with the lowest training loss and gives no
        ``return_std``.
    calibration_folds : int, "auto" or None, default="auto"
        Cross-fit the error model behind ``return_std``: deal all training
        subjects into this many folds, train a network like the imputer's
        on all folds but one (as many epochs as the imputer kept) and fit
        the error model on the residuals of each on its left-out fold, so
        it learns from every subject rather than the few held out (the
        imputer's own network is unchanged; fitting takes about
        ``calibration_folds + 1`` times as long). ``"auto"``: 5 folds below
        500 subjects, where the held-out subjects are too few to set the
        bands' level (see ``docs/neural.md``) and training is cheap; none
        above. ``None``: the held-out subjects only. Needs
        ``validation_fraction > 0``; not used with ``warm_start``.
    clip_grad : float or None, default=1.0
        Clip the gradient's global norm (SAND's layer and the transformer
        separately).
    regularizers : list of Regularizer, default=None
        Penalties added to the loss, e.g. ``[Roughness(1.0)]``; see
        :mod:`fdaimpute.nn.regularizers`. Their unweighted values per epoch
        are recorded in ``history_["reg/<name>"]``.
    device : str, default="auto"
        ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``,
        ``"cuda:1"``...
    amp : {"auto", True, False, "bfloat16", "float16"}, default="auto"
        Mixed-precision training, only ever used on CUDA: bfloat16 autocast
        on GPUs that support it (Ampere and later), float16 autocast with
        gradient scaling on older ones; a type name forces that type.
        ``"auto"``: bfloat16 with ``cuda_graph`` (twice as fast a step at
        the paper's sizes on an H200), float32 without (the casts add
        launches to steps already bound by them: 1.5 times slower).
        Inference is always float32.
    cuda_graph : {"auto", True, False}, default="auto"
        On CUDA, capture the training step in a CUDA graph and replay it:
        one launch per step instead of hundreds, which is what limits
        these small networks on a GPU (4 times faster a step with the CPU
        preset's sizes on an H200; ``docs/benchmarks.md``, section
        ``gpu-profile``). Batches are then padded to the longest subject
        and an epoch's partial last batch is left out (the shuffle leaves
        out other subjects each epoch). It cannot be used on the CPU,
        across processes, with regularizers, with float16 loss scaling, with
        a statistical base (``base=None`` is needed) or with fewer subjects
        than ``batch_size``: ``"auto"`` then trains eagerly, ``True`` too but
        with a warning saying why.
    predict_batch_size : int or "auto", default="auto"
        Subjects per forward pass in ``transform``; memory does not grow
        with the number of subjects beyond the output. ``"auto"``: 256 on
        the CPU, 4096 on CUDA (5 times the throughput of 256 there).
    random_state : int, RandomState or None, default=None
        Seeds initialisation, shuffling, hiding and the validation split;
        the same seed gives identical curves on the same device and thread
        count.
    verbose : bool, default=False
        Show the fit's progress: one bar over its phases (the base, the
        training, each cross-fitted network, the calibration of the
        bands), each named while it runs, and below it one bar over each
        training's epochs with the losses.
    warm_start : bool, default=False
        Continue training the fitted network (same scaler, time map and
        grid) instead of starting afresh; the optimizer restarts. One
        variable without covariates only: a fit on several variables or
        with covariates starts afresh, with a warning.
    %(grid)s
    %(extrapolate)s
    %(keep_observed)s"""

COMMON_ATTRS_DOC = """
    module_ : torch.nn.Module
        The trained network (in eval mode).
    module_config_ : dict
        Its constructor arguments.
    history_ : dict of list
        Per epoch: ``epoch``, ``train_loss``, ``valid_loss`` (MSE of
        standardised values), ``lr``, ``seconds``, ``reg/<name>``.
    best_epoch_ : int
        The epoch whose weights were kept; ``-1`` (one less than the first
        epoch of this fit) when no epoch beat the start, i.e. the base.
    base_ : imputer or None
        The fitted base (see ``base``).
    covariate_encoding_ : dict
        With ``covariates``: each covariate's coding (``"numeric"`` with
        its training mean, or ``"categorical"`` with its reference level
        and the other levels), as ``MultivariatePACEImputer`` has it.
    covariate_columns_ : list of str
        With ``covariates``: the design's columns (``"age"``,
        ``"sex=m"``...) that the network reads, each scaled by
        ``covariate_scale_``.
    covariate_scale_ : ndarray
        With ``covariates``: each design column's training SD (1 where it
        is 0).
    base_weight_ : float, ndarray of shape (p,) or None
        With a base: the weight ``g`` of the network's curve in the output
        (0: the base; 1: the network alone), one per variable on several;
        None without a base.
    start_gain_ : tuple of float, list or None
        With a base: how much lower the best epoch's held-out error was
        than the base's on the comparison subjects, that gain in standard
        errors, and a one-sided signed-rank test's p-value of the subjects'
        drops (reported, not used: see ``start_level`` of
        :class:`~fdaimpute.nn.Trainer`), or None when no epoch beat the
        base at all. On several variables, a list of such tuples, one per
        variable (None for a variable with no hidden point among the
        comparison subjects, which keeps the base).
    n_epochs_ : int
        Epochs run.
    cuda_graph_ : bool
        Whether the training steps ran from a captured CUDA graph
        (``cuda_graph``).
    stop_reason_ : str
        ``"max_epochs"``, ``"max_time"``, ``"early stopping"``,
        ``"non-finite loss"`` (the best finite epoch is kept, with a
        warning) or ``"interrupted"``.
    interrupted_ : bool
        Whether training stopped on a ``KeyboardInterrupt`` (see
        ``fit``); the best epoch so far is kept and ``error_head_`` is
        None.
    config_ : dict
        The settings used: every size and training parameter (``d_model``,
        ``n_heads``, ``encoder_layers``, ``decoder_layers``,
        ``dim_feedforward``, ``dropout``, ``encoding_dim``, ``max_epochs``,
        ``batch_size``, ``lr``, ``lr_schedule``, ``patience``,
        ``visible_weight``, SAND's
        ``sand_*``) resolved from ``preset`` and the explicit parameters,
        and ``validation_fraction``.
    split_ : dict of ndarray
        Positions among the training subjects of the ``"train"`` subjects
        and of the held-out ones that chose the epoch (``"selection"``) and
        fitted ``error_head_`` (``"calibration"``; the same subjects, see
        the Notes).
    mean_ : ndarray of shape (n_grid,)
        The mean curve on ``grid_``: the average of the imputed curves of
        the subjects passed to ``fit``.
    %(grid_)s
    model_grid_ : ndarray
        The grid the network outputs (``grid_`` unless that does not cover
        the training times).
    time_range_ : tuple of float
        Training time range, mapped to [0, 1] inside the network.
    value_mean_, value_scale_ : float
        Standardisation of the values.
    noise_variance_ : float
        Estimated variance of the measurement noise (data units; see
        :func:`fdaimpute.noise.noise_variance`); the base's own where the
        imputer kept its base (one per variable on several variables).
        ``noise_variance_at(t)`` is this value at every time, or the kept
        base's own profile over time.
    error_head_ : ErrorVarianceHead or None
        The error model behind ``transform(X, return_std=True)``, fitted on
        the held-out subjects (None without them); see
        :mod:`fdaimpute.nn.uncertainty`.
    device_ : torch.device
        Where the network lives.
    n_parameters_ : int
        Trainable parameters."""

COMMON_PARAMS_DOC = fill_docstring(COMMON_PARAMS_DOC, "lets the method extrapolate")
COMMON_ATTRS_DOC = fill_docstring(COMMON_ATTRS_DOC, "lets the method extrapolate")
