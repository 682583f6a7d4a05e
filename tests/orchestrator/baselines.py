"""A baseline's record the economics and race tests hold contenders to (no Ray)."""

# Baseline: 10 epochs of 10 s, S = 0.80; the target 0.79 first at epoch 8 (80 s).
BASELINE = {"train_time_s": 100.0, "val_score": 0.80, "epochs": 10,
            "curve": [[e, [0.5, 0.6, 0.65, 0.7, 0.74, 0.76, 0.78, 0.79, 0.795, 0.80][e - 1],
                       10.0 * e] for e in range(1, 11)]}
# The same run whose validations scatter as unet3d's Dice did (two dips of 4-6 points): the race
# holds each of a contender's points no surer than SIGMA (race.noise), where BASELINE's smooth
# curve gives 0.03.
NOISY = BASELINE | {"curve": [
    [e, [0.5, 0.6, 0.65, 0.7, 0.66, 0.76, 0.72, 0.79, 0.795, 0.80][e - 1], 10.0 * e]
    for e in range(1, 11)]}
