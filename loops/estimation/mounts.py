"""Where an estimator's sensors are: the ``[[sensors]]`` its ``imu`` and ``contacts`` options name."""
from __future__ import annotations

import numpy as np

from rtctl.options import did_you_mean, show, show_all


def _find(sensors: dict, key: str, name: str, kind: str):
    sensor = sensors.get(name)
    if sensor is None:
        raise ValueError(f"{key}: no [[sensors]] table named {show(name)}{did_you_mean(name, sensors)}; sensors: "
                         f"{show_all(sorted(sensors))}")
    if sensor.kind != kind:
        raise ValueError(f"{key}: sensor {show(name)} is a {sensor.kind!r} sensor, not {kind!r}")
    return sensor


def sensor_mounts(model, sensors: dict, options, owner: str):
    """``(feet, foot_points, imu)`` of the sensors ``options`` names (``sensors`` by name): each contact sensor's
    body (by name) and its origin in that body; the IMU's ``(body, rotation, translation)``. ValueError naming
    the key and the sensor (the config names the file and the section)."""
    if options.contacts is None:
        raise ValueError("contacts: needs the [[sensors]] foot contacts it reads, one per foot "
                         f"(the {owner} estimates from leg kinematics)")
    imu = _find(sensors, "imu", options.imu, "imu")
    contacts = [_find(sensors, "contacts", name, "contact") for name in options.contacts]
    for name, sensor in zip(options.contacts, contacts):
        if sensor.body < 0:
            raise ValueError(f"contacts: sensor {show(name)} is fixed to the world, not on a foot")
    feet = [model.body_names[s.body] for s in contacts]
    points = np.array([s.translation for s in contacts], dtype=float).reshape(len(contacts), 3)
    return feet, points, (imu.body, imu.rotation, imu.translation)
